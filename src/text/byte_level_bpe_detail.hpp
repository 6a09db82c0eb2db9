#pragma once
// defines (private to src/text/): GPT-2's byte <-> character mapping (bytes_to_unicode) as the byte-level BPE's
// files spell tokens, and the limits its loaders check.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::text::detail {

// tokenizers keeps ids as u32; tessera's token streams as int64. Ids above this are refused.
inline constexpr std::int64_t kMaxTokenId = (std::int64_t{1} << 31) - 1;

// The character GPT-2 writes for byte b: b itself for the printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF), else
// U+0100 + k for the k-th of the others in byte order (so ' ' is U+0120 'Ġ', '\n' is U+010A 'Ċ').
char32_t byte_to_char(unsigned char b);

// The bytes `token` (UTF-8) spells in that mapping, or nullopt when one of its characters is no byte's character
// (an added token such as "<|end of text|>" with a real space in it).
std::optional<std::string> byte_level_decode(std::string_view token);

// Two upper-case hex digits.
std::string hex_byte(char byte);

}  // namespace tessera::text::detail
