// implements: text/utf8.hpp.
#include "tessera/text/utf8.hpp"

#include <cstdint>

namespace tessera::text {

Utf8Char decode_utf8(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(at);
  if (lead < 0x80) return {lead, 1, true};
  // The lead byte fixes the length and the range of the second byte (Unicode 15, table 3-7): the narrower second
  // ranges exclude overlong forms (E0, F0), surrogates (ED) and code points above U+10FFFF (F4).
  std::size_t length = 0;
  std::uint8_t low = 0x80, high = 0xBF;
  char32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code = lead & 0x07;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {0, 1, false};  // a continuation byte, C0, C1 or F5-FF: never starts a character
  }
  for (std::size_t k = 1; k < length; ++k) {
    // The maximal subpart ends before the first byte that cannot continue the sequence.
    if (at + k >= text.size()) return {0, k, false};
    const std::uint8_t b = byte(at + k);
    const std::uint8_t lo = k == 1 ? low : 0x80, hi = k == 1 ? high : 0xBF;
    if (b < lo || b > hi) return {0, k, false};
    code = (code << 6) | (b & 0x3F);
  }
  return {code, length, true};
}

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<std::uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Char c = decode_utf8(text, i);
    if (!c.valid) return i;
    i += c.length;
  }
  return std::nullopt;
}

void append_utf8(std::string& out, char32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

std::string lossy_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Char c = decode_utf8(bytes, i);
    if (c.valid) out.append(bytes.substr(i, c.length));
    else out += "\xEF\xBF\xBD";
    i += c.length;
  }
  return out;
}

}  // namespace tessera::text
