// tests: text/tokenizer.hpp on the committed tokenizers (tests/text/fixtures/): which file a path picks, known ids
// (from python sentencepiece 0.2.1 and tokenizers 0.23.3), round trips, special ids, fingerprints, every refusal.
// tests/reference/check_tokenizers.py compares thousands of strings with the Python packages.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/text/tokenizer.hpp"
#include "text_fixtures.hpp"

using tessera::text::Tokenizer;
using tessera::testing::read_text;
using tessera::testing::text_fixture;
using tessera::testing::text_scratch_dir;
using tessera::testing::write_text;
using Catch::Contains;
using Ids = std::vector<std::int64_t>;
namespace fs = std::filesystem;

namespace {

std::string load_error(const fs::path& path) {
  try {
    Tokenizer::load(path);
  } catch (const tessera::Error& e) {
    return e.what();
  }
  return "loaded";
}

void copy_fixture(const char* name, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(text_fixture(name))) fs::copy_file(entry.path(), to / entry.path().filename());
}

}  // namespace

TEST_CASE("Tokenizer: SentencePiece models, from the directory or the file", "[text]") {
  const Tokenizer llama = Tokenizer::load(text_fixture("sp_bpe"));
  CHECK(llama.kind() == "sentencepiece");
  CHECK(llama.source() == text_fixture("sp_bpe") / "tokenizer.model");
  CHECK(llama.encode("Hello world") == Ids{847, 298, 863, 614});
  CHECK(llama.decode(llama.encode("naïve café\t1. e4 e5")) == "naïve café\t1. e4 e5");
  CHECK(llama.encode("<s> x") == Ids{371, 869, 931, 860, 880});  // "<s>" in text is text to SentencePiece
  CHECK(llama.vocab_size() == 1000);
  CHECK(llama.bos_id() == 1);
  CHECK(llama.eos_id() == 2);
  CHECK_FALSE(llama.pad_id());
  CHECK(llama.token_id("</s>") == 2);
  const Tokenizer same = Tokenizer::load(text_fixture("sp_bpe") / "tokenizer.model");
  CHECK(same.fingerprint() == llama.fingerprint());
  CHECK(llama.fingerprint().starts_with("sentencepiece:"));
  CHECK(llama.fingerprint().size() == std::string("sentencepiece:").size() + 16);

  const Tokenizer t5 = Tokenizer::load(text_fixture("sp_unigram"));
  CHECK(t5.encode("naïve café") == Ids{227, 229});
  CHECK_FALSE(t5.bos_id());
  CHECK(t5.eos_id() == 1);
  CHECK(t5.pad_id() == 0);
  CHECK(t5.fingerprint() != llama.fingerprint());
}

TEST_CASE("Tokenizer: byte-level BPE from tokenizer.json and from vocab.json + merges.txt, as OPT's", "[text]") {
  const Tokenizer json = Tokenizer::load(text_fixture("bpe_json"));
  CHECK(json.kind() == "byte-level-bpe");
  CHECK(json.source() == text_fixture("bpe_json") / "tokenizer.json");
  CHECK(json.encode("Hello world") == Ids{939, 305, 82, 630});
  CHECK(json.encode("1. e4 e5 2. Nf3 Nc6") == Ids{20, 17, 289, 23, 289, 24, 285, 17, 934, 22, 906, 25});
  CHECK(json.encode("it's 3.14!") == Ids{76, 87, 334, 293, 17, 20, 23, 4});
  CHECK(json.encode("\xf0\x9f\x99\x82") == Ids{298, 883});
  // Special and added tokens in the text are split out as their ids; decode drops the special ones.
  CHECK(json.encode("Hello world</s> <pad>x<s>") == Ids{939, 305, 82, 630, 2, 224, 1, 91, 0});
  CHECK(json.encode("<|sep|> x") == Ids{1000, 960});
  CHECK(json.decode(Ids{68, 2, 69, 1000}) == "ab<|sep|>");
  for (const std::string text : {"  two  spaces\n\n", "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd", "", "\t\r\n x"})
    CHECK(json.decode(json.encode(text)) == text);
  // OPT: </s> (2) is its BOS and EOS, <pad> (1) its padding, as tokenizer_config.json says.
  CHECK(json.bos_id() == 2);
  CHECK(json.eos_id() == 2);
  CHECK(json.pad_id() == 1);
  CHECK(json.vocab_size() == 1001);
  CHECK(json.token_id("\xc4\xa0the") == 288);
  CHECK_FALSE(json.token_id(" the"));

  const Tokenizer files = Tokenizer::load(text_fixture("bpe_files"));
  CHECK(files.source() == text_fixture("bpe_files") / "vocab.json");
  CHECK(files.encode("Hello world</s> x") == Ids{939, 305, 82, 630, 2, 960});
  CHECK(files.encode("<s>") == Ids{31, 86, 33});  // only the tokens the config files name are split out
  CHECK(files.bos_id() == 2);
  CHECK(files.pad_id() == 1);
  CHECK(files.vocab_size() == 1000);
  CHECK(Tokenizer::load(text_fixture("bpe_files") / "merges.txt").fingerprint() == files.fingerprint());
  CHECK(files.fingerprint() != json.fingerprint());
}

TEST_CASE("Tokenizer: a directory with tokenizer.json and tokenizer.model uses the json only when byte-level", "[text]") {
  const fs::path dir = text_scratch_dir("tok-both");
  copy_fixture("sp_unigram", dir);
  // What transformers writes beside a Llama or T5 model: a conversion with another pre-tokenizer.
  write_text(dir / "tokenizer.json", R"({"model": {"type": "Unigram", "vocab": []}, "pre_tokenizer": {"type": "Metaspace"}})");
  write_text(dir / "tokenizer_config.json", R"({"pad_token": "<unk>", "eos_token": {"content": "</s>"}})");
  const Tokenizer t5 = Tokenizer::load(dir);
  CHECK(t5.kind() == "sentencepiece");
  CHECK(t5.pad_id() == 2);  // the config's <unk> overrides the model's <pad>
  CHECK(t5.eos_id() == 1);
  CHECK_FALSE(t5.bos_id());
  // The config files are part of the fingerprint.
  CHECK(t5.fingerprint() != Tokenizer::load(text_fixture("sp_unigram")).fingerprint());
  write_text(dir / "tokenizer_config.json", R"({"bos_token": "<bos>"})");
  CHECK(load_error(dir) == (dir / "tokenizer_config.json").string() +
                               ": bos_token is \"<bos>\" (there or in special_tokens_map.json), which tokenizer.model has "
                               "no token for; name a token the tokenizer has, or remove the key");
  fs::remove(dir / "tokenizer_config.json");
  // T5 and Flan-T5 as the hub ships them: spiece.model beside the conversion; tokenizer.model wins when both exist.
  fs::rename(dir / "tokenizer.model", dir / "spiece.model");
  const Tokenizer flan = Tokenizer::load(dir);
  CHECK(flan.kind() == "sentencepiece");
  CHECK(flan.source() == dir / "spiece.model");
  CHECK(flan.encode("the quick brown fox") == Tokenizer::load(text_fixture("sp_unigram")).encode("the quick brown fox"));
  fs::copy_file(text_fixture("sp_bpe") / "tokenizer.model", dir / "tokenizer.model");
  CHECK(Tokenizer::load(dir).source() == dir / "tokenizer.model");
  fs::remove(dir / "tokenizer.model");
  fs::remove(dir / "spiece.model");
  CHECK_THAT(load_error(dir), Contains("tokenizer.json: model.type is \"Unigram\", not \"BPE\""));
  fs::remove_all(dir);
}

TEST_CASE("Tokenizer::load refuses missing, damaged and unsupported files, saying what to do", "[text]") {
  const fs::path dir = text_scratch_dir("tok-bad");
  const std::string hint =
      "give a model directory with tokenizer.json, tokenizer.model (spiece.model) or vocab.json + merges.txt, or one of "
      "those files";
  CHECK(load_error(dir / "absent") == (dir / "absent").string() + ": no such file or directory; " + hint);
  CHECK(load_error(dir) ==
        dir.string() + ": has no tokenizer.json, tokenizer.model, spiece.model or vocab.json + merges.txt; " + hint);
  write_text(dir / "vocab.json", "{}");
  CHECK(load_error(dir) == dir.string() + ": has vocab.json but no merges.txt beside it; " + hint);
  CHECK(load_error(dir / "vocab.json") ==
        (dir / "merges.txt").string() + ": no such file; vocab.json needs it beside it; vocab.json and merges.txt come together");
  write_text(dir / "merges.txt", "#version: 0.2\n");
  CHECK_THAT(load_error(dir), Contains("vocab.json: vocab.json is empty; a tokenizer needs a vocabulary"));

  write_text(dir / "notes.txt", "hello");
  CHECK_THROWS_AS(Tokenizer::load(dir / "notes.txt"), tessera::ConfigError);
  CHECK(load_error(dir / "notes.txt") == (dir / "notes.txt").string() +
                                             ": is not a tokenizer file (tokenizer.json, *.model, vocab.json or "
                                             "merges.txt); " + hint);
  REQUIRE(::mkfifo((dir / "fifo.json").c_str(), 0600) == 0);
  CHECK_THROWS_AS(Tokenizer::load(dir / "fifo.json"), tessera::ConfigError);
  CHECK_THAT(load_error(dir / "fifo.json"), Contains("is not a directory or regular file (a FIFO, socket or device)"));

  write_text(dir / "bad.model", "\x0a\x05garbage");
  CHECK_THROWS_AS(Tokenizer::load(dir / "bad.model"), tessera::FormatError);
  CHECK_THAT(load_error(dir / "bad.model"), Contains("bad.model: is not a SentencePiece model"));
  write_text(dir / "tokenizer.json", "{\"model\": {");
  CHECK_THAT(load_error(dir / "tokenizer.json"), Contains("tokenizer.json: is not valid JSON"));
  fs::create_directories(dir / "json-dir" / "tokenizer.json");
  CHECK_THAT(load_error(dir / "json-dir"), Contains("has no tokenizer.json"));

  // A merge that names a token the vocabulary lacks: the file and the merge (tokens in messages are ASCII JSON).
  const fs::path opt = dir / "opt";
  copy_fixture("bpe_files", opt);
  write_text(opt / "merges.txt", read_text(opt / "merges.txt") + "Ġ zq\n");
  CHECK_THAT(load_error(opt), Contains((opt / "merges.txt").string() + ": merge 741 (\"\\u0120\" \"zq\") names \"zq\", which is "
                                                                       "not in the vocabulary"));
  fs::remove_all(dir);
}

TEST_CASE("Tokenizer: invalid UTF-8, bad ids, copies", "[text]") {
  const Tokenizer bpe = Tokenizer::load(text_fixture("bpe_json"));
  CHECK_THROWS_AS(bpe.encode("caf\xe9"), tessera::FormatError);
  CHECK_THAT([&] {
    try {
      bpe.encode("caf\xe9");
    } catch (const tessera::FormatError& e) {
      return std::string(e.what());
    }
    return std::string();
  }(), Contains("byte 3 of the text (0xE9) is not valid UTF-8"));
  const Tokenizer sp = Tokenizer::load(text_fixture("sp_bpe"));
  CHECK(sp.encode("caf\xe9") == Ids{267, 864, 876, 242, 194, 192});  // 0xE9 alone: U+FFFD, as bytes <0xEF> <0xBF> <0xBD>
  CHECK_THROWS_WITH(bpe.decode(Ids{5000}), Contains("id 5000 names no token"));
  const Tokenizer copy = bpe;  // shares the model
  CHECK(copy.encode("Hello") == bpe.encode("Hello"));
  CHECK(&copy.fingerprint() == &bpe.fingerprint());
}
