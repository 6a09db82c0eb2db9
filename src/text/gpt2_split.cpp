// implements: text/gpt2_split.hpp.
#include "tessera/text/gpt2_split.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "tessera/text/utf8.hpp"
#include "unicode_classes.hpp"

namespace tessera::text {
namespace {

std::uint8_t lookup(char32_t code) {
  const auto* end = std::end(unicode::kUnicodeClassRanges);
  const auto* it = std::upper_bound(std::begin(unicode::kUnicodeClassRanges), end, code,
                                    [](char32_t c, const unicode::ClassRange& r) { return c < r.first; });
  if (it == std::begin(unicode::kUnicodeClassRanges)) return 0;
  --it;
  return code <= it->last ? it->bits : 0;
}

// ASCII is most of most text: one table load instead of a binary search.
const std::array<std::uint8_t, 128> kAscii = [] {
  std::array<std::uint8_t, 128> table{};
  for (char32_t c = 0; c < 128; ++c) table[c] = lookup(c);
  return table;
}();

std::uint8_t bits(char32_t code) { return code < 128 ? kAscii[code] : lookup(code); }

CharClass to_class(std::uint8_t b) {
  switch (b & unicode::kClassMask) {
    case unicode::kLetter: return CharClass::letter;
    case unicode::kNumber: return CharClass::number;
    case unicode::kSpace: return CharClass::space;
    default: return CharClass::other;
  }
}

// "'s", "'t", "'re", "'ve", "'m", "'ll", "'d" at `at`: the match's length in bytes, or 0.
std::size_t contraction(std::string_view text, std::size_t at) {
  if (text[at] != '\'') return 0;
  for (const std::string_view suffix : {"s", "t", "re", "ve", "m", "ll", "d"})
    if (text.substr(at + 1, suffix.size()) == suffix) return 1 + suffix.size();
  return 0;
}

}  // namespace

CharClass gpt2_char_class(char32_t code) { return to_class(bits(code)); }
bool is_word_char(char32_t code) { return (bits(code) & unicode::kWordBit) != 0; }
bool is_space_char(char32_t code) { return (bits(code) & unicode::kSpaceBit) != 0; }

std::vector<std::string_view> gpt2_split(std::string_view text) {
  // Characters as (byte offset, class), with a sentinel offset at the end: the regex works on characters.
  std::vector<std::size_t> offset;
  std::vector<CharClass> cls;
  offset.reserve(text.size() + 1);
  cls.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    offset.push_back(i);
    cls.push_back(gpt2_char_class(c.code));
    i += c.length;
  }
  const std::size_t n = cls.size();
  offset.push_back(text.size());
  const auto run_end = [&](std::size_t k, CharClass want) {
    while (k < n && cls[k] == want) ++k;
    return k;
  };

  std::vector<std::string_view> pieces;
  for (std::size_t k = 0; k < n;) {
    std::size_t end = k;
    if (const std::size_t bytes = contraction(text, offset[k]); bytes > 0) {
      end = k + bytes;  // ASCII: one byte per character
    } else if (text[offset[k]] == ' ' && k + 1 < n && cls[k + 1] != CharClass::space) {
      end = run_end(k + 1, cls[k + 1]);  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" with the space
    } else if (cls[k] != CharClass::space) {
      end = run_end(k, cls[k]);  // the same three without it
    } else {
      // "\s+(?!\S)": the whole run at the end of the text, else all of it but its last character, which then leads
      // the next piece (" word") or, when it is a lone whitespace character other than U+0020, is "\s+" alone.
      end = run_end(k, CharClass::space);
      if (end < n && end - k > 1) --end;
    }
    pieces.push_back(text.substr(offset[k], offset[end] - offset[k]));
    k = end;
  }
  return pieces;
}

}  // namespace tessera::text
