// tests: text/added_tokens.hpp: leftmost-longest matching, single_word, lstrip / rstrip, the two passes.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "tessera/text/added_tokens.hpp"

using namespace tessera::text;

namespace {

// The segments as (text, id or -1).
std::vector<std::pair<std::string, std::int64_t>> cut(const AddedTokens& tokens, std::string_view text) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const TextSegment& s : tokens.split(text)) out.emplace_back(std::string(s.text), s.id.value_or(-1));
  return out;
}

using Cuts = std::vector<std::pair<std::string, std::int64_t>>;

AddedToken token(std::string content, std::int64_t id) {
  AddedToken t;
  t.content = std::move(content);
  t.id = id;
  t.normalized = false;
  return t;
}

}  // namespace

TEST_CASE("AddedTokens: the leftmost match, the longest there, and the text between", "[text]") {
  const AddedTokens tokens({token("</s>", 2), token("<s>", 0), token("<s><s>", 9)});
  CHECK(cut(tokens, "") == Cuts{{"", -1}});
  CHECK(cut(tokens, "plain") == Cuts{{"plain", -1}});
  CHECK(cut(tokens, "a</s>b<s>") == Cuts{{"a", -1}, {"</s>", 2}, {"b", -1}, {"<s>", 0}});
  CHECK(cut(tokens, "<s><s><s>") == Cuts{{"<s><s>", 9}, {"<s>", 0}});
  CHECK(cut(tokens, "</s</s>") == Cuts{{"</s", -1}, {"</s>", 2}});
  CHECK(tokens.find("</s>")->id == 2);
  CHECK(tokens.find(9)->content == "<s><s>");
  CHECK(tokens.find("<pad>") == nullptr);
}

TEST_CASE("AddedTokens: single_word needs no word character beside it, lstrip/rstrip take the spaces", "[text]") {
  AddedToken word = token("the", 5);
  word.single_word = true;
  AddedToken mask = token("<mask>", 6);
  mask.lstrip = true;
  AddedToken sep = token("[R]", 7);
  sep.rstrip = true;
  const AddedTokens tokens({word, mask, sep});
  CHECK(cut(tokens, "the cat") == Cuts{{"the", 5}, {" cat", -1}});
  CHECK(cut(tokens, "other") == Cuts{{"other", -1}});   // a letter before
  CHECK(cut(tokens, "the_") == Cuts{{"the_", -1}});     // '_' is a word character
  CHECK(cut(tokens, "\xc3\xa9the") == Cuts{{"\xc3\xa9the", -1}});
  CHECK(cut(tokens, "(the)") == Cuts{{"(", -1}, {"the", 5}, {")", -1}});
  CHECK(cut(tokens, "a  \t<mask>b") == Cuts{{"a", -1}, {"  \t<mask>", 6}, {"b", -1}});
  CHECK(cut(tokens, "x[R] \xc2\xa0 y") == Cuts{{"x", -1}, {"[R] \xc2\xa0 ", 7}, {"y", -1}});
  // lstrip stops where the previous token's segment ends.
  CHECK(cut(tokens, "[R]  <mask>") == Cuts{{"[R]  ", 7}, {"<mask>", 6}});
}

TEST_CASE("AddedTokens: unnormalized tokens first, normalized ones in what is left", "[text]") {
  AddedToken normalized = token("ab", 1);
  normalized.normalized = true;
  const AddedTokens tokens({normalized, token("bc", 2)});
  // Leftmost-longest over all tokens would take "ab"; the first pass takes "bc" before the normalized ones look.
  CHECK(cut(tokens, "abc") == Cuts{{"a", -1}, {"bc", 2}});
  CHECK(cut(tokens, "abab") == Cuts{{"ab", 1}, {"ab", 1}});
  // Empty content is ignored; a content given twice keeps its last entry.
  const AddedTokens twice({token("", 3), token("<x>", 4), token("<x>", 8)});
  CHECK(twice.tokens().size() == 1);
  CHECK(twice.find("<x>")->id == 8);
}
