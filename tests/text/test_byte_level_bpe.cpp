// tests: text/byte_level_bpe.hpp on small hand-written tokenizers: merge order, unknown bytes, the options, the
// two file formats and every refusal.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/text/byte_level_bpe.hpp"

using namespace tessera::text;
using Catch::Contains;
using Ids = std::vector<std::int64_t>;
using nlohmann::json;

namespace {

// 'Ġ' (U+0120) is the byte ' ' in GPT-2's byte-to-character map.
json tiny() {
  return json::parse(R"({
    "added_tokens": [{"id": 12, "content": "<s>", "special": true, "single_word": false, "lstrip": false,
                      "rstrip": false, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "c": 2, "\u0120": 3, "ab": 4, "bc": 5, "abc": 6, "\u0120a": 7, "aa": 8,
                        "<unk>": 9, "ca": 10, "\u0120\u0120": 11},
              "merges": ["\u0120 \u0120", "a b", "b c", ["ab", "c"], "\u0120 a", "a a"]}
  })");
}

ByteLevelBpe load(const json& j) { return ByteLevelBpe::from_tokenizer_json(j.dump(), "tiny/tokenizer.json"); }

}  // namespace

TEST_CASE("ByteLevelBpe merges by rank, leftmost first among equal ranks", "[text]") {
  const ByteLevelBpe bpe = load(tiny());
  CHECK(bpe.encode("abc") == Ids{6});         // a+b (rank 1), then ab+c
  CHECK(bpe.encode("bc") == Ids{5});
  CHECK(bpe.encode("aaa") == Ids{8, 0});      // the pair at 0 before the pair at 1
  CHECK(bpe.encode("ca") == Ids{2, 0});       // in the vocabulary, but no merge makes it
  CHECK(bpe.encode("ab a") == Ids{4, 7});     // " a" is one piece of the regex
  CHECK(bpe.encode("az") == Ids{0});          // no unk_token: a byte the vocabulary lacks is dropped
  CHECK(bpe.encode("a<s>b") == Ids{0, 12, 1});
  CHECK(bpe.encode("a  a") == Ids{0, 3, 7});  // the regex leaves the last space to the word after it
  CHECK(bpe.encode("") == Ids{});
  CHECK(bpe.decode(Ids{7, 1, 12, 2}) == " abc");  // <s> is special: left out
  CHECK(bpe.token_id("\xc4\xa0" "a") == 7);       // as the file spells it: "Ġa"
  CHECK(bpe.token_id("<s>") == 12);
  CHECK_FALSE(bpe.token_id(" a"));
  CHECK(bpe.vocab_size() == 13);
}

TEST_CASE("ByteLevelBpe: unk_token with and without fuse_unk, ignore_merges, add_prefix_space, use_regex", "[text]") {
  json j = tiny();
  j["model"]["unk_token"] = "<unk>";
  CHECK(load(j).encode("azzb") == Ids{0, 9, 9, 1});
  j["model"]["fuse_unk"] = true;
  CHECK(load(j).encode("azzb") == Ids{0, 9, 1});
  j = tiny();
  j["model"]["ignore_merges"] = true;
  CHECK(load(j).encode("ca") == Ids{10});
  j = tiny();
  j["pre_tokenizer"]["add_prefix_space"] = true;
  CHECK(load(j).encode("a<s>a") == Ids{7, 12, 7});  // every stretch between added tokens gets its space
  j = tiny();
  j["pre_tokenizer"]["use_regex"] = false;
  CHECK(load(j).encode("a  a") == Ids{0, 11, 0});  // one piece: the two spaces merge first
}

TEST_CASE("ByteLevelBpe gives added tokens the ids tokenizers gives them", "[text]") {
  json j = tiny();
  // "ab" is in the vocabulary: it keeps id 4. The new ones follow the 12 entries, then each other; the ids the
  // file lists for them are not used (tokenizers only warns about them).
  j["added_tokens"] = json::array({json{{"id", 4}, {"content", "ab"}}, json{{"id", 50}, {"content", "<x>"}},
                                   json{{"id", 50}, {"content", "<y>"}, {"special", true}}});
  const ByteLevelBpe bpe = load(j);
  CHECK(bpe.token_id("ab") == 4);
  CHECK(bpe.token_id("<x>") == 12);
  CHECK(bpe.token_id("<y>") == 13);
  CHECK(bpe.encode("c<x>ab<y>") == Ids{2, 12, 4, 13});
  CHECK(bpe.decode(Ids{12, 13}) == "<x>");
}

TEST_CASE("ByteLevelBpe reads vocab.json + merges.txt as GPT2Tokenizer does", "[text]") {
  const std::string vocab = R"({"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "</s>": 5})";
  AddedToken eos;
  eos.content = "</s>";
  eos.id = -1;
  eos.special = true;
  const ByteLevelBpe bpe = ByteLevelBpe::from_vocab_merges(vocab, "d/vocab.json", "#version: 0.2\r\na b\r\nab c\r\n",
                                                           "d/merges.txt", {eos}, false);
  CHECK(bpe.encode("abc</s>abca") == Ids{4, 5, 4, 0});
  CHECK(bpe.decode(Ids{4, 5}) == "abc");
  CHECK_THROWS_MATCHES(ByteLevelBpe::from_vocab_merges(vocab, "d/vocab.json", "a b\n\nab c\n", "d/merges.txt", {}, false),
                       tessera::FormatError,
                       Catch::Matchers::Message("d/merges.txt: line 2 is \"\", not two tokens separated by one space; "
                                                "merges.txt has a \"#version\" line and then one merge \"a b\" per line, "
                                                "nothing else"));
  CHECK_THROWS_WITH(ByteLevelBpe::from_vocab_merges(vocab, "d/vocab.json", "a b c\n", "d/merges.txt", {}, false),
                    Contains("line 1 is \"a b c\""));
  CHECK_THROWS_WITH(ByteLevelBpe::from_vocab_merges(vocab, "d/vocab.json", "a q\n", "d/merges.txt", {}, false),
                    Contains("d/merges.txt: merge 1 (\"a\" \"q\") names \"q\", which is not in the vocabulary; the "
                             "merges and the vocabulary must come from the same tokenizer"));
  CHECK_THROWS_WITH(ByteLevelBpe::from_vocab_merges(vocab, "d/vocab.json", "b c\n", "d/merges.txt", {}, false),
                    Contains("names \"bc\", which is not in the vocabulary"));
  CHECK_THROWS_WITH(ByteLevelBpe::from_vocab_merges("[1]", "d/vocab.json", "", "d/merges.txt", {}, false),
                    Contains("d/vocab.json: vocab.json must be an object {\"token\": id}, got an array"));
  CHECK_THROWS_WITH(ByteLevelBpe::from_vocab_merges(R"({"a": -1})", "d/vocab.json", "", "d/merges.txt", {}, false),
                    Contains("vocab.json[\"a\"] must be a token id from 0 to 2147483647, got -1"));
  CHECK_THROWS_WITH(ByteLevelBpe::from_vocab_merges(R"({"a": 0, "b": 0})", "d/vocab.json", "", "d/merges.txt", {}, false),
                    Contains("both have id 0"));
}

TEST_CASE("ByteLevelBpe refuses what it does not implement, naming the key and the fix", "[text]") {
  const auto refusal = [](auto change) {
    json j = tiny();
    change(j);
    try {
      load(j);
    } catch (const tessera::FormatError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refusal([](json& j) { j["model"]["type"] = "WordPiece"; }),
             Contains("tiny/tokenizer.json: model.type is \"WordPiece\", not \"BPE\"; tessera reads byte-level BPE from "
                      "tokenizer.json (GPT-2, OPT, RoBERTa); for a SentencePiece model (Llama, T5) give its "
                      "tokenizer.model (T5: spiece.model) instead"));
  CHECK_THAT(refusal([](json& j) { j["normalizer"] = {{"type", "NFC"}}; }),
             Contains("normalizer is {\"type\":\"NFC\"}, not null"));
  CHECK_THAT(refusal([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }),
             Contains("pre_tokenizer is {\"type\":\"Metaspace\"}, not {\"type\": \"ByteLevel\", ...}"));
  CHECK_THAT(refusal([](json& j) { j["pre_tokenizer"] = nullptr; }), Contains("pre_tokenizer is null"));
  CHECK_THAT(refusal([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }), Contains("decoder is {\"type\":\"WordPiece\"}"));
  CHECK_THAT(refusal([](json& j) { j["model"]["dropout"] = 0.1; }), Contains("model.dropout is 0.1; BPE dropout"));
  CHECK_THAT(refusal([](json& j) { j["model"]["byte_fallback"] = true; }), Contains("model.byte_fallback is true"));
  CHECK_THAT(refusal([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }),
             Contains("model.continuing_subword_prefix is \"##\""));
  CHECK_THAT(refusal([](json& j) { j["model"]["unk_token"] = "<?>"; }), Contains("model.unk_token \"<?>\" is not in model.vocab"));
  CHECK_THAT(refusal([](json& j) { j["model"]["merges"][0] = 7; }), Contains("model.merges[0] is 7, not \"a b\""));
  CHECK_THAT(refusal([](json& j) { j["model"]["merges"][0] = "a z"; }), Contains("names \"z\", which is not in the vocabulary"));
  CHECK_THAT(refusal([](json& j) { j["model"].erase("vocab"); }), Contains("model.vocab is missing"));
  CHECK_THAT(refusal([](json& j) { j.erase("model"); }), Contains("has no \"model\" object"));
  CHECK_THAT(refusal([](json& j) { j["added_tokens"][0].erase("content"); }), Contains("added_tokens[0].content must be a string"));
  CHECK_THAT(refusal([](json& j) { j["added_tokens"][0]["lstrip"] = "yes"; }),
             Contains("added_tokens[0].lstrip must be true or false, got \"yes\""));
  // A vocabulary with a gap: the new token would get an id that is already a token's.
  CHECK_THAT(refusal([](json& j) {
               j["model"]["vocab"].erase("ca");
               j["model"]["vocab"]["zz"] = 12;
               j["added_tokens"] = json::array({json{{"id", 13}, {"content", "<new>"}}});
             }),
             Contains("added token \"<new>\" gets id 12, which the vocabulary gives \"zz\""));
  CHECK_THROWS_WITH(ByteLevelBpe::from_tokenizer_json("{\"model\": ", "t.json"), Contains("t.json: is not valid JSON"));
  CHECK_THROWS_WITH(ByteLevelBpe::from_tokenizer_json("[]", "t.json"), Contains("t.json: is not a JSON object, got an array"));
}

TEST_CASE("ByteLevelBpe refuses invalid UTF-8 and unknown ids by position", "[text]") {
  const ByteLevelBpe bpe = load(tiny());
  CHECK_THROWS_MATCHES(bpe.encode("ab\xff"), tessera::FormatError,
                       Catch::Matchers::Message(
                           "encode with tiny/tokenizer.json: byte 2 of the text (0xFF) is not valid UTF-8; a byte-level "
                           "BPE tokenizes Unicode text, as Hugging Face tokenizers (which takes Python str only) does: "
                           "decode the data as UTF-8, replacing invalid bytes, first"));
  CHECK_THROWS_WITH(bpe.decode(Ids{0, 13}), Contains("decode with tiny/tokenizer.json: id 13 names no token (the vocabulary "
                                                     "has ids 0 to 12)"));
  CHECK_THROWS_WITH(bpe.decode(Ids{-1}), Contains("id -1 names no token"));
}
