// tests: text/gpt2_split.hpp: GPT-2's pre-tokenization regex, branch by branch, and the generated Unicode classes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tessera/text/gpt2_split.hpp"

using namespace tessera::text;

namespace {

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  for (const auto piece : gpt2_split(text)) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

}  // namespace

TEST_CASE("gpt2_split cuts words, numbers, punctuation and contractions with their leading space", "[text]") {
  CHECK(split("").empty());
  CHECK(split("Hello my friend, how's it?") == Pieces{"Hello", " my", " friend", ",", " how", "'s", " it", "?"});
  CHECK(split("1. e4 e5 2. Nf3") == Pieces{"1", ".", " e", "4", " e", "5", " 2", ".", " Nf", "3"});
  CHECK(split("they're we've I'm you'll he'd can't") ==
        Pieces{"they", "'re", " we", "'ve", " I", "'m", " you", "'ll", " he", "'d", " can", "'t"});
  // Only lower-case ASCII contractions; anything else is punctuation then letters.
  CHECK(split("IT'S rock'n") == Pieces{"IT", "'", "S", " rock", "'", "n"});
  CHECK(split("a!!?b ...") == Pieces{"a", "!!?", "b", " ..."});
}

TEST_CASE("gpt2_split keeps a whitespace run's last character for the next word", "[text]") {
  // "\s+(?!\S)": all but the last space of a run before a word, the whole run at the end.
  CHECK(split("a   b") == Pieces{"a", "  ", " b"});
  CHECK(split("a  ") == Pieces{"a", "  "});
  CHECK(split("a\n\nb") == Pieces{"a", "\n", "\n", "b"});  // "\n" cannot lead a word: "\s+" alone
  CHECK(split("x \t y") == Pieces{"x", " \t", " y"});
  CHECK(split("  lead") == Pieces{" ", " lead"});
  // No-break and ideographic spaces are \s too, but only U+0020 joins the next word.
  CHECK(split("a\xc2\xa0" "b") == Pieces{"a", "\xc2\xa0", "b"});
  CHECK(split("a\xe3\x80\x80\xe3\x80\x80" "b") == Pieces{"a", "\xe3\x80\x80", "\xe3\x80\x80", "b"});
}

TEST_CASE("gpt2_split: letters, numbers and the rest beyond ASCII", "[text]") {
  CHECK(split("caf\xc3\xa9 na\xc3\xafve") == Pieces{"caf\xc3\xa9", " na\xc3\xafve"});
  CHECK(split("x\xc2\xb2+1") == Pieces{"x", "\xc2\xb2", "+", "1"});  // superscript two is \p{N}
  CHECK(split("\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c") == Pieces{"\xe4\xbd\xa0\xe5\xa5\xbd", "\xef\xbc\x8c"});
  CHECK(split(" \xf0\x9f\x99\x82\xf0\x9f\x9a\x80!") == Pieces{" \xf0\x9f\x99\x82\xf0\x9f\x9a\x80!"});  // emoji: "other"
  // A combining mark is no letter (Mn): it ends the word before it.
  CHECK(split("e\xcc\x81t\xc3\xa9") == Pieces{"e", "\xcc\x81", "t\xc3\xa9"});
}

TEST_CASE("the generated classes agree with Oniguruma's and Rust regex's", "[text]") {
  CHECK(gpt2_char_class(U'a') == CharClass::letter);
  CHECK(gpt2_char_class(U'\u00e9') == CharClass::letter);
  CHECK(gpt2_char_class(U'\u4f60') == CharClass::letter);
  CHECK(gpt2_char_class(U'7') == CharClass::number);
  CHECK(gpt2_char_class(U'\u2460') == CharClass::number);  // circled one
  CHECK(gpt2_char_class(U' ') == CharClass::space);
  CHECK(gpt2_char_class(U'\u3000') == CharClass::space);
  CHECK(gpt2_char_class(U'\u200b') == CharClass::other);  // zero-width space: a format character
  CHECK(gpt2_char_class(U'\U0001F642') == CharClass::other);
  CHECK(gpt2_char_class(U'\U0010FFFF') == CharClass::other);
  CHECK(is_word_char(U'_'));
  CHECK(is_word_char(U'\u0301'));  // marks are \w in Rust regex
  CHECK_FALSE(is_word_char(U'\u00b2'));
  CHECK(is_space_char(U'\u00a0'));
  CHECK_FALSE(is_space_char(U'\u200b'));
}
