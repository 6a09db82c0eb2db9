// tests: text/chunks.hpp: the cut rule, and long texts encoded in chunks of a few bytes with the ids of the whole
// text, by the committed tokenizers (tests/text/fixtures/) and byte-level variants of them (add_prefix_space, added
// tokens with lstrip / rstrip / single_word), over spaces, tabs, newlines, Unicode, digits, punctuation, added and
// special tokens; which SentencePiece models are cut.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tessera/text/byte_level_bpe.hpp"
#include "tessera/text/chunks.hpp"
#include "tessera/text/sentencepiece.hpp"
#include "tessera/text/tokenizer.hpp"
#include "text_fixtures.hpp"

using namespace tessera::text;
using tessera::testing::read_text;
using tessera::testing::text_fixture;
using Catch::Contains;
using Ids = std::vector<std::int64_t>;

namespace {

constexpr std::size_t kSmallChunks[] = {0, 1, 2, 3, 5, 8, 13, 40, 200};

// Seeded texts from fragments that test the cut rule's edges: runs of spaces, tabs, newlines, no-break and
// ideographic spaces, "▁", accented and CJK text, emoji, digits, punctuation, contractions, added and special tokens,
// and (for SentencePiece only) invalid UTF-8; some start or end with spaces.
std::vector<std::string> texts(bool invalid_utf8) {
  const std::vector<std::string> fragments = {
      "the", "quick", "brown", "fox", "1. e4 e5 2. Nf3 Nc6", "don't", "it's", "we're", "3.14159", "2024", "12 345",
      "!", "?!", "...", "(x)", "a_b", "\"q\"", "café", "naïve", "東京", "你好世界", "🙂", "👍🏽", "e\u0301",
      "\xe2\x96\x81", "x\xe2\x96\x81y", "\xe2\x96\x81\xe2\x96\x81", "</s>", "<s>", "<pad>", "<|sep|>", "<mask>", "[R]",
      "ing", "é!", " ", "  ", "   ", "\t", "\n", " \n ", "\xc2\xa0", "\xe3\x80\x80", "'s", "'ll"};
  const std::vector<std::string> separators = {" ", " ", " ", " ", "", "  ", "\t", "\n", " \t ", "\xc2\xa0"};
  std::mt19937 rng(20240611);
  const auto pick = [&](const std::vector<std::string>& from) { return from[rng() % from.size()]; };
  std::vector<std::string> out = {"", " ", "a", "a b", " a b ", "a  b", "ab cd ef", "  leading words here",
                                  "trailing words here  ", "x \xe2\x96\x81 y", std::string(300, 'x'),
                                  "one two</s>three four <s> five"};
  for (int i = 0; i < 150; ++i) {
    std::string text = i % 5 == 0 ? pick(separators) : "";
    for (int n = 1 + static_cast<int>(rng() % 60); n > 0; --n) text += pick(fragments) + pick(separators);
    if (invalid_utf8 && i % 7 == 0) text += "\xff \xe2\x96 x\x80 y";
    out.push_back(text);
  }
  return out;
}

// How many cuts the texts offer: the checks below are only worth something when the texts are actually cut.
std::size_t cuts(const std::vector<std::string>& all) {
  std::size_t n = 0;
  for (const std::string& text : all)
    for (std::size_t at = 0; at < text.size(); ++at) n += is_chunk_cut(text, at) ? 1 : 0;
  return n;
}

template <class Model>
void check_chunked_equals_whole(const Model& model, const std::vector<std::string>& all) {
  for (const std::string& text : all) {
    const Ids whole = model.encode(text);
    for (const std::size_t chunk : kSmallChunks) {
      INFO("text \"" << text << "\", chunk_bytes " << chunk);
      CHECK(model.encode(text, chunk) == whole);
    }
  }
}

SentencePiece sentencepiece(const std::string& bytes) {
  return SentencePiece::from_model_bytes(bytes, "t/tokenizer.model");
}

// Protobuf fields appended to a serialized message: a message given twice is merged, later scalars winning.
std::string varint(std::uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
  return out + static_cast<char>(v);
}
std::string field(int number, std::uint64_t value) {
  return varint(static_cast<std::uint64_t>(number) << 3) + varint(value);
}
std::string field(int number, const std::string& bytes) {
  return varint(static_cast<std::uint64_t>(number) << 3 | 2) + varint(bytes.size()) + bytes;
}

}  // namespace

TEST_CASE("is_chunk_cut: a single space between characters that are neither whitespace nor \"▁\"", "[text]") {
  CHECK(is_chunk_cut("a b", 1));
  CHECK(is_chunk_cut("caf\xc3\xa9 \xe6\x9d\xb1", 5));          // "café 東": multi-byte characters on both sides
  CHECK(is_chunk_cut("\xf0\x9f\x99\x82 !", 4));               // an emoji before
  CHECK(is_chunk_cut("1. e4", 2));
  CHECK_FALSE(is_chunk_cut("a b", 0));
  CHECK_FALSE(is_chunk_cut("a b", 2));
  CHECK_FALSE(is_chunk_cut(" a", 0));                          // nothing before
  CHECK_FALSE(is_chunk_cut("a ", 1));                          // nothing after
  CHECK_FALSE(is_chunk_cut("a  b", 1));
  CHECK_FALSE(is_chunk_cut("a  b", 2));
  CHECK_FALSE(is_chunk_cut("a\t b", 2));
  CHECK_FALSE(is_chunk_cut("a \nb", 1));
  CHECK_FALSE(is_chunk_cut("a\xc2\xa0 b", 3));                 // U+00A0, no-break space
  CHECK_FALSE(is_chunk_cut("a \xe3\x80\x80" "b", 1));          // U+3000, ideographic space
  CHECK_FALSE(is_chunk_cut("\xe2\x96\x81 b", 3));              // "▁" before
  CHECK_FALSE(is_chunk_cut("a \xe2\x96\x81", 1));              // "▁" after
  CHECK_FALSE(is_chunk_cut("a\xff b", 2));                     // invalid UTF-8 before
  CHECK_FALSE(is_chunk_cut("a \xe2\x96", 1));                  // a truncated character after
  CHECK_FALSE(is_chunk_cut("ab", 1));
}

TEST_CASE("chunk_end: the first cut at or after begin + chunk_bytes, else the end", "[text]") {
  const std::string_view text = "aa bb  cc dd";  // cuts at 2 and 9
  CHECK(chunk_end(text, 0, 100) == text.size());
  CHECK(chunk_end(text, 0, 12) == text.size());
  CHECK(chunk_end(text, 0, 0) == 2);
  CHECK(chunk_end(text, 0, 2) == 2);
  CHECK(chunk_end(text, 0, 3) == 9);
  CHECK(chunk_end(text, 3, 1) == 9);
  CHECK(chunk_end(text, 9, 1) == text.size());
  CHECK(chunk_end(text, text.size(), 1) == text.size());
  const std::string no_cut(5000, 'x');  // no space: one chunk, however long
  CHECK(chunk_end(no_cut, 0, 10) == no_cut.size());
}

TEST_CASE("SentencePiece BPE: a text encoded in chunks has the ids of the whole text", "[text]") {
  const SentencePiece sp = sentencepiece(read_text(text_fixture("sp_bpe") / "tokenizer.model"));
  CHECK(sp.why_unchunked().empty());
  const auto all = texts(true);
  CHECK(cuts(all) > 1000);
  check_chunked_equals_whole(sp, all);
  // A chunk's first piece: "▁" + the word, as in the whole text ("▁He ll o ▁world").
  CHECK(sp.encode("Hello world", 1) == Ids{847, 298, 863, 614});
  const Tokenizer tok = Tokenizer::load(text_fixture("sp_bpe"));
  for (const std::string& text : all) CHECK(tok.encode(text, 3) == tok.encode(text));
}

TEST_CASE("SentencePiece: models whose ids a cut could change encode every text whole", "[text]") {
  const SentencePiece unigram = sentencepiece(read_text(text_fixture("sp_unigram") / "tokenizer.model"));
  CHECK_THAT(unigram.why_unchunked(), Contains("a unigram model"));
  check_chunked_equals_whole(unigram, texts(true));

  const std::string bpe = read_text(text_fixture("sp_bpe") / "tokenizer.model");
  const auto piece = [](const std::string& text, int type) { return field(1, field(1, text) + field(3, type)); };
  CHECK_THAT(sentencepiece(bpe + piece("a\xe2\x96\x81" "b", 1)).why_unchunked(), Contains("\"a\xe2\x96\x81" "b\""));
  CHECK_THAT(sentencepiece(bpe + piece("\xe2\x96\x81\xe2\x96\x81x\xe2\x96\x81", 1)).why_unchunked(),
             Contains("span a cut"));
  CHECK_THAT(sentencepiece(bpe + piece("a b", 4)).why_unchunked(), Contains("holds a space"));
  CHECK(sentencepiece(bpe + piece("\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81q", 4)).why_unchunked().empty());  // "▁" leads
  CHECK_THAT(sentencepiece(bpe + piece("qqq", 5)).why_unchunked(), Contains("unused pieces"));
  CHECK_THAT(sentencepiece(bpe + field(3, field(3, 0))).why_unchunked(), Contains("add_dummy_prefix is false"));
  CHECK_THAT(sentencepiece(bpe + field(3, field(5, 0))).why_unchunked(), Contains("escape_whitespaces is false"));
  CHECK_THAT(sentencepiece(bpe + field(2, field(24, 1))).why_unchunked(), Contains("treat_whitespace_as_suffix"));
  CHECK_THAT(sentencepiece(bpe + field(2, field(3, 1))).why_unchunked(), Contains("a unigram model"));
  // Why: "▁the▁of" (id 1000) is a merge of "▁the" (289) and "▁of" (394), which chunks would keep apart.
  const SentencePiece crossing = sentencepiece(bpe + piece("\xe2\x96\x81the\xe2\x96\x81of", 1));
  CHECK(crossing.encode("the of") == Ids{1000});
  CHECK(crossing.encode("the of", 1) == Ids{1000});
}

TEST_CASE("byte-level BPE: a text encoded in chunks has the ids of the whole text", "[text]") {
  const auto all = texts(false);
  CHECK(cuts(all) > 1000);
  for (const char* name : {"bpe_json", "bpe_files"}) {
    INFO(name);
    const Tokenizer tok = Tokenizer::load(text_fixture(name));
    for (const std::string& text : all)
      for (const std::size_t chunk : kSmallChunks) CHECK(tok.encode(text, chunk) == tok.encode(text));
  }
  const auto base = nlohmann::json::parse(read_text(text_fixture("bpe_json") / "tokenizer.json"));
  const auto load = [](const nlohmann::json& j) {
    return ByteLevelBpe::from_tokenizer_json(j.dump(), "v/tokenizer.json");
  };
  auto prefixed = base;
  prefixed["pre_tokenizer"]["add_prefix_space"] = true;
  check_chunked_equals_whole(load(prefixed), all);
  auto no_regex = base;
  no_regex["pre_tokenizer"]["use_regex"] = false;
  check_chunked_equals_whole(load(no_regex), all);
  auto flags = base;
  const auto added = [&](const char* content, int id, const char* flag) {
    nlohmann::json token = {{"id", id},        {"content", content}, {"single_word", false}, {"lstrip", false},
                            {"rstrip", false}, {"normalized", false}, {"special", false}};
    token[flag] = true;
    flags["added_tokens"].push_back(token);
  };
  added("<mask>", 1001, "lstrip");
  added("[R]", 1002, "rstrip");
  added("ing", 1003, "single_word");
  added("\xc3\xa9!", 1004, "lstrip");
  added("fox", 1005, "normalized");
  const ByteLevelBpe with_flags = load(flags);
  CHECK(with_flags.encode("x <mask> y") != load(base).encode("x <mask> y"));
  check_chunked_equals_whole(with_flags, all);
}
