// implements: text/chunks.hpp.
#include "tessera/text/chunks.hpp"

#include <algorithm>

#include "tessera/text/gpt2_split.hpp"
#include "tessera/text/utf8.hpp"

namespace tessera::text {
namespace {

constexpr char32_t kSpaceSymbol = 0x2581;  // "▁"

bool is_plain(const Utf8Char& c) {
  return c.valid && c.code != kSpaceSymbol && gpt2_char_class(c.code) != CharClass::space;
}

}  // namespace

bool is_chunk_cut(std::string_view text, std::size_t at) {
  if (at == 0 || at + 1 >= text.size() || text[at] != ' ') return false;
  // The character before `at`: back over at most three continuation bytes to its lead byte.
  std::size_t lead = at - 1;
  while (lead > 0 && at - lead < 4 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
  const Utf8Char before = decode_utf8(text, lead);
  return lead + before.length == at && is_plain(before) && is_plain(decode_utf8(text, at + 1));
}

std::size_t chunk_end(std::string_view text, std::size_t begin, std::size_t chunk_bytes) {
  if (begin >= text.size() || text.size() - begin <= chunk_bytes) return text.size();
  for (std::size_t at = begin + std::max<std::size_t>(chunk_bytes, 1); at < text.size(); ++at) {
    at = text.find(' ', at);
    if (at == std::string_view::npos) break;
    if (is_chunk_cut(text, at)) return at;
  }
  return text.size();
}

}  // namespace tessera::text
