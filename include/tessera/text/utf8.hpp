#pragma once
// defines: the UTF-8 steps the tokenizers share: decode one character (with the length of an invalid sequence as
// the Unicode standard's "maximal subpart" counts it), find the first invalid byte, encode a code point, and the
// lossy conversion of raw bytes to text that Rust's String::from_utf8_lossy (Hugging Face tokenizers' decode) does.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::text {

// One character of UTF-8 text at a byte offset: its code point and byte length (1-4), or, when the bytes there are
// no valid UTF-8 (a stray continuation byte, a truncated sequence, an overlong form, a surrogate, above U+10FFFF),
// valid = false and length = the bytes of the maximal subpart (1-3), which one U+FFFD replaces.
struct Utf8Char {
  char32_t code = 0;
  std::size_t length = 1;
  bool valid = false;
};

// The character that starts at byte `at` of `text` (at < text.size()).
Utf8Char decode_utf8(std::string_view text, std::size_t at);

// The byte offset of the first invalid sequence in `text`, or nullopt when all of it is valid UTF-8.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

// Appends the UTF-8 form of `code` (a Unicode scalar value) to `out`.
void append_utf8(std::string& out, char32_t code);

// `bytes` as valid UTF-8: each maximal subpart of an invalid sequence becomes U+FFFD (EF BF BD), the rest is kept.
std::string lossy_utf8(std::string_view bytes);

}  // namespace tessera::text
