// tests: the text readers and the token cache (data/text_data.hpp) and TokenBatches over text: litgpt's Alpaca
// prompt, instruction rows (prompt lengths, BOS/EOS as the tokenizer's config says), packed documents from .txt,
// .jsonl and .json, the cache (reused, rebuilt when the source or tokenizer changes, a damaged one refused), the
// refusals of bad records by file and line, and the rows TokenBatches builds (cut, padded, prompt masked).
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../text/text_fixtures.hpp"
#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/text_data.hpp"
#include "tessera/data/token_batches.hpp"
#include "tessera/text/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace tessera;
using tessera::testing::text_fixture;
using tessera::testing::text_scratch_dir;
using tessera::testing::write_text;

namespace {

// The Llama-like SentencePiece fixture in a directory of its own, with a tokenizer_config.json saying what a Llama
// directory says (LlamaTokenizer: BOS added).
fs::path llama_like_dir(const fs::path& scratch) {
  const fs::path dir = scratch / "tok";
  fs::create_directories(dir);
  fs::copy_file(text_fixture("sp_bpe/tokenizer.model"), dir / "tokenizer.model");
  write_text(dir / "tokenizer_config.json", R"({"tokenizer_class": "LlamaTokenizer"})");
  return dir;
}

std::vector<std::int64_t> row_of(const data::TextRows& rows, std::int64_t i) {
  const auto b = rows.starts[static_cast<std::size_t>(i)], e = rows.starts[static_cast<std::size_t>(i) + 1];
  return {rows.tokens.begin() + static_cast<std::ptrdiff_t>(b), rows.tokens.begin() + static_cast<std::ptrdiff_t>(e)};
}

std::vector<std::int64_t> concat(std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("alpaca_prompt is litgpt's Alpaca template, with and without an input", "[text_data]") {
  CHECK(data::alpaca_prompt("Add.", "") ==
        "Below is an instruction that describes a task. Write a response that appropriately completes the request."
        "\n\n### Instruction:\nAdd.\n\n### Response:\n");
  CHECK(data::alpaca_prompt("Add.", "2 and 3") ==
        "Below is an instruction that describes a task, paired with an input that provides further context. Write a "
        "response that appropriately completes the request.\n\n### Instruction:\nAdd.\n\n### Input:\n2 and 3\n\n"
        "### Response:\n");
}

TEST_CASE("instructions: BOS + prompt + output + EOS as litgpt 0.5.7, the prompt's length kept, JSON or JSONL",
          "[text_data]") {
  const fs::path dir = text_scratch_dir("instr");
  const auto tok = text::Tokenizer::load(llama_like_dir(dir));
  REQUIRE(tok.add_bos_token());
  REQUIRE_FALSE(tok.add_eos_token());
  const std::int64_t bos = *tok.bos_id(), eos = *tok.eos_id();

  write_text(dir / "a.jsonl", "{\"instruction\": \"Name a color.\", \"output\": \"Blue.\"}\n\n"
                              "{\"instruction\": \"Add.\", \"input\": \"2 and 3\", \"output\": \"5\"}\n");
  write_text(dir / "a.json", "[\n  {\"instruction\": \"Name a color.\", \"input\": \"\", \"output\": \"Blue.\"},\n"
                             "  {\"output\": \"5\", \"input\": \"2 and 3\", \"instruction\": \"Add.\"}\n]\n");
  for (const char* name : {"a.jsonl", "a.json"}) {
    INFO(name);
    const data::TextRows rows = data::read_text_rows(dir / name, tok);
    REQUIRE(rows.kind == data::TextKind::instructions);
    REQUIRE(rows.rows() == 2);
    const std::string p0 = data::alpaca_prompt("Name a color.", ""), p1 = data::alpaca_prompt("Add.", "2 and 3");
    // litgpt 0.5.7: the prompt and the response are tokenized apart.
    CHECK(row_of(rows, 0) == concat(concat(concat({bos}, tok.encode(p0)), tok.encode("Blue.")), {eos}));
    CHECK(row_of(rows, 1) == concat(concat(concat({bos}, tok.encode(p1)), tok.encode("5")), {eos}));
    CHECK(rows.prompt_lengths[0] == 1 + tok.encode(p0).size());
    CHECK(rows.prompt_lengths[1] == 1 + tok.encode(p1).size());
  }
  fs::remove_all(dir);
}

TEST_CASE("documents: a line of .txt or a JSONL \"text\" each, ending in EOS, no BOS without the config's say",
          "[text_data]") {
  const fs::path dir = text_scratch_dir("docs");
  const auto tok = text::Tokenizer::load(text_fixture("sp_bpe/tokenizer.model"));
  REQUIRE_FALSE(tok.add_bos_token());
  const std::int64_t eos = *tok.eos_id();
  write_text(dir / "games.txt", "1. e4 e5 2. Nf3 Nc6\r\n\n   \n1. d4 d5\n");
  write_text(dir / "games.jsonl", "{\"text\": \"1. e4 e5 2. Nf3 Nc6\"}\n{\"text\": \"1. d4 d5\", \"id\": 7}\n");
  for (const char* name : {"games.txt", "games.jsonl"}) {
    INFO(name);
    const data::TextRows rows = data::read_text_rows(dir / name, tok);
    REQUIRE(rows.kind == data::TextKind::documents);
    REQUIRE(rows.rows() == 2);
    CHECK(row_of(rows, 0) == concat(tok.encode("1. e4 e5 2. Nf3 Nc6"), {eos}));
    CHECK(row_of(rows, 1) == concat(tok.encode("1. d4 d5"), {eos}));
    CHECK(rows.prompt_lengths == std::vector<std::uint32_t>{0, 0});
  }
  fs::remove_all(dir);
}

TEST_CASE("bad records are refused by file and line, saying what a record must be", "[text_data]") {
  const fs::path dir = text_scratch_dir("bad");
  const auto tok = text::Tokenizer::load(text_fixture("sp_bpe/tokenizer.model"));
  const auto refuses = [&](const char* name, const std::string& text, const std::string& message) {
    write_text(dir / name, text);
    INFO(name << ": " << text);
    CHECK_THROWS_WITH(data::read_text_rows(dir / name, tok), Catch::Contains(message));
  };
  const std::string f = (dir / "x.jsonl").string(), j = (dir / "x.json").string();
  refuses("x.jsonl", "{\"instruction\": \"a\", \"output\": \"b\"}\n{\"instruction\": \"a\"}\n",
          f + ":2: no \"output\"");
  refuses("x.jsonl", "{\"instruction\": \"a\", \"output\": 3}\n", f + ":1: \"output\" must be a string, got a number");
  refuses("x.jsonl", "{\"instruction\": \"a\", \"output\": \"\"}\n", f + ":1: \"output\" is empty");
  refuses("x.jsonl", "{\"text\": \"a\"}\n{\"instruction\": \"a\", \"output\": \"b\"}\n",
          f + ":2: an instruction record in a file whose first record is a text record");
  refuses("x.jsonl", "{\"text\": \"a\"}\nnot json\n", f + ":2: not a JSON object");
  refuses("x.jsonl", "{\"prompt\": \"a\"}\n", f + ":1: neither \"text\" nor \"instruction\"");
  refuses("x.jsonl", "{\"text\": \"  \"}\n", f + ":1: \"text\" is empty");
  refuses("x.jsonl", "\n\n", "holds no records");
  refuses("x.json", "{\"text\": \"a\"}", j + ":1: not a JSON array");
  refuses("x.json", "[\n {\"text\": \"a\"},\n\n {\"text\": \"a\",}\n]", j + ":4: element 1 is not a JSON object");
  refuses("x.json", "[\n {\"text\": \"a\"},\n {\"text\": \"a\"", j + ":3: element 1 does not end");
  refuses("x.json", "[{\"text\": \"a\"}] x", j + ":1: text after the array");
  refuses("x.json", "[\n {\"text\": \"a\"},\n {\"text\": 1}]", j + ":3: \"text\" must be a string");
  CHECK_THROWS_WITH(data::read_text_rows(dir / "missing.txt", tok), Catch::Contains("missing.txt: does not exist"));
  fs::remove_all(dir);
}

TEST_CASE("the token cache: written once, reused, rebuilt for another source or tokenizer, refused when damaged",
          "[text_data]") {
  const fs::path dir = text_scratch_dir("cache");
  const auto sp = text::Tokenizer::load(text_fixture("sp_bpe/tokenizer.model"));
  const auto bpe = text::Tokenizer::load(text_fixture("bpe_json"));
  const fs::path file = dir / "games.txt";
  write_text(file, "1. e4 e5\n1. d4 d5\n");
  const fs::path cache = data::token_cache_path(file, sp);
  CHECK(cache.parent_path() == dir);
  CHECK(cache.filename().string().rfind("games.txt.sentencepiece-", 0) == 0);
  CHECK(data::token_cache_path(file, bpe) != cache);

  const data::TextRows first = data::load_text_rows(file, sp);
  REQUIRE(fs::exists(cache));
  const std::string header = tessera::testing::read_text(cache).substr(0, 200);
  CHECK(header.rfind("tessera-token-cache 2\ntokenizer " + sp.fingerprint() + "\n", 0) == 0);
  const data::TextRows again = data::load_text_rows(file, sp);
  CHECK(again.tokens == first.tokens);
  CHECK(again.starts == first.starts);
  CHECK(again.prompt_lengths == first.prompt_lengths);
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK(entry.path().filename().string().find(".partial-") == std::string::npos);

  // Another text in the source: the cache no longer names it and is written again.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  write_text(file, "1. c4\n");
  const data::TextRows changed = data::load_text_rows(file, sp);
  CHECK(changed.rows() == 1);
  CHECK(changed.tokens == data::read_text_rows(file, sp).tokens);

  // Another tokenizer: its own cache beside the first.
  const data::TextRows other = data::load_text_rows(file, bpe);
  CHECK(other.tokens == data::read_text_rows(file, bpe).tokens);
  CHECK(fs::exists(data::token_cache_path(file, bpe)));

  // A cache cut short under a header that names the source: refused, saying to delete it.
  fs::resize_file(cache, fs::file_size(cache) - 1);
  CHECK_THROWS_WITH(data::load_text_rows(file, sp), Catch::Contains("a damaged token cache") &&
                                                        Catch::Contains("delete it"));
  fs::remove_all(dir);
}

TEST_CASE("the token cache: a changed byte, or a header claiming rows the file cannot hold, is refused naming it",
          "[text_data]") {
  const fs::path dir = text_scratch_dir("cache-damaged");
  const auto sp = text::Tokenizer::load(text_fixture("sp_bpe/tokenizer.model"));
  const fs::path file = dir / "games.txt";
  write_text(file, "1. e4 e5\n1. d4 d5\n1. c4 c5\n");
  const fs::path cache = data::token_cache_path(file, sp);
  const data::TextRows first = data::load_text_rows(file, sp);
  const std::string written = tessera::testing::read_text(cache);
  const auto rewrite = [&](std::string bytes) { std::ofstream(cache, std::ios::binary | std::ios::trunc) << bytes; };
  const auto line = [&](const std::string& key) {  // the header's line "key value"
    const std::size_t at = written.find("\n" + key + " ") + 1;
    return written.substr(at, written.find('\n', at) - at);
  };
  CHECK(line("crc32c").size() == std::string("crc32c 01234567").size());

  SECTION("a flipped byte in the tokens") {
    std::string bytes = written;
    bytes[bytes.size() - 1] ^= 0x01;
    rewrite(bytes);
    CHECK_THROWS_WITH(data::load_text_rows(file, sp),
                      Catch::Contains(cache.string() + ": a damaged token cache (its CRC-32C is") &&
                          Catch::Contains("a byte changed since it was written); delete it"));
  }
  SECTION("a flipped byte in the header's counts") {
    std::string bytes = written;
    bytes[written.find("\nrows ") + 6] ^= 0x01;  // 3 rows -> 2: the size no longer adds up
    rewrite(bytes);
    CHECK_THROWS_WITH(data::load_text_rows(file, sp), Catch::Contains("a damaged token cache (its header says 2 rows"));
  }
  SECTION("2^62 rows, with tokens chosen so that the size adds up modulo 2^64") {
    // Once: 12 * 2^62 wrapped to 0, the size check passed, and 2^62 rows were allocated (vector::_M_default_append).
    const std::uint64_t body = written.size() - 4096, rows = 1ull << 62;
    const std::uint64_t tokens = (body - 12 * rows) / 2;  // modulo 2^64, as the check once computed
    std::string bytes = written;
    std::string header = bytes.substr(0, 4096);
    header.replace(header.find(line("rows")), line("rows").size(), "rows " + std::to_string(rows));
    header.replace(header.find(line("tokens")), line("tokens").size(), "tokens " + std::to_string(tokens));
    header.resize(4096, '\0');
    rewrite(header + bytes.substr(4096));
    CHECK_THROWS_WITH(data::load_text_rows(file, sp),
                      Catch::Contains("a damaged token cache (its header says 4611686018427387904 rows and " +
                                      std::to_string(tokens) + " tokens, and its body holds " + std::to_string(body) +
                                      " bytes"));
  }
  SECTION("intact: read back") {
    CHECK(data::load_text_rows(file, sp).tokens == first.tokens);
  }
  fs::remove_all(dir);
}

TEST_CASE("TokenBatches over instructions: rows cut to seq_len, padded, targets shifted, mask_prompt hides the prompt",
          "[text_data]") {
  const fs::path dir = text_scratch_dir("batches");
  const fs::path tok_dir = llama_like_dir(dir);
  const auto tok = text::Tokenizer::load(tok_dir);
  write_text(dir / "a.jsonl", "{\"instruction\": \"Name a color.\", \"output\": \"Blue.\"}\n"
                              "{\"instruction\": \"Write a long answer.\", \"output\": \"" + std::string(400, 'x') +
                                  "\"}\n");
  const data::TextRows rows = data::read_text_rows(dir / "a.jsonl", tok);
  const auto short_row = row_of(rows, 0);
  RunConfig cfg;
  cfg.data = (dir / "a.jsonl").string();
  cfg.tokenizer = tok_dir.string();
  cfg.batch_size = 2;
  cfg.seq_len = static_cast<std::int64_t>(short_row.size()) + 5;  // row 0 padded; row 1 cut
  REQUIRE(row_of(rows, 1).size() > static_cast<std::size_t>(cfg.seq_len));
  for (const bool mask : {false, true}) {
    INFO("mask_prompt=" << mask);
    cfg.mask_prompt = mask;
    const data::TokenBatches batches(cfg, models::TokenSpec{tok.vocab_size()}, 1);
    CHECK(batches.total_steps() == 1);
    CHECK(batches.tokens_per_step() == 2 * cfg.seq_len);
    const auto b = batches.batch(0, 0, 0, c10::Device(c10::kCPU));
    REQUIRE(b.inputs.sizes() == at::IntArrayRef({2, cfg.seq_len}));
    const auto in = b.inputs.accessor<std::int64_t, 2>();
    const auto tg = b.targets.accessor<std::int64_t, 2>();
    const std::size_t prompt = rows.prompt_lengths[0];
    for (std::int64_t t = 0; t < cfg.seq_len; ++t) {
      const auto u = static_cast<std::size_t>(t);
      CHECK(in[0][t] == (u < short_row.size() ? short_row[u] : 0));
      const bool trained = u + 1 < short_row.size() && (!mask || u + 1 >= prompt);
      CHECK(tg[0][t] == (trained ? short_row[u + 1] : -100));
      CHECK(in[1][t] == row_of(rows, 1)[u]);
    }
    CHECK(tg[1][cfg.seq_len - 1] == -100);  // the last input's target lies beyond the cut, as litgpt's
    CHECK(tg[1][cfg.seq_len - 2] == row_of(rows, 1)[static_cast<std::size_t>(cfg.seq_len) - 1]);
  }
  fs::remove_all(dir);
}

TEST_CASE("TokenBatches over documents packs them into one stream, text needs a tokenizer that fits the model",
          "[text_data]") {
  const fs::path dir = text_scratch_dir("packed");
  const auto tok = text::Tokenizer::load(text_fixture("sp_bpe/tokenizer.model"));
  std::string text;
  for (int i = 0; i < 40; ++i) text += "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 game " + std::to_string(i) + "\n";
  write_text(dir / "games.txt", text);
  RunConfig cfg;
  cfg.data = (dir / "games.txt").string();
  cfg.batch_size = 2;
  cfg.seq_len = 16;
  CHECK_THROWS_WITH(data::TokenBatches(cfg, models::TokenSpec{tok.vocab_size()}, 1),
                    Catch::Contains("text, which needs a tokenizer; give tokenizer=DIR"));
  cfg.tokenizer = text_fixture("sp_bpe/tokenizer.model").string();
  const data::TokenBatches batches(cfg, models::TokenSpec{tok.vocab_size()}, 1);
  const data::TextRows rows = data::read_text_rows(dir / "games.txt", tok);
  const auto b = batches.batch(0, 0, 0, c10::Device(c10::kCPU));
  for (std::int64_t t = 0; t < 16; ++t) {
    CHECK(b.inputs[0][t].item<std::int64_t>() == rows.tokens[static_cast<std::size_t>(t)]);
    CHECK(b.targets[0][t].item<std::int64_t>() == rows.tokens[static_cast<std::size_t>(t) + 1]);
  }
  CHECK(std::string(batches.description()).find("documents " + cfg.data) == 0);
  CHECK_THROWS_WITH(data::TokenBatches(cfg, models::TokenSpec{8}, 1),
                    Catch::Contains("but the model's vocab_size is 8; the tokenizer is not the model's"));
  fs::remove_all(dir);
}
