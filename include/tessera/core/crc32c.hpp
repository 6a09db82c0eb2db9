#pragma once
// defines: crc32c, the CRC-32C (Castagnoli) checksum that training-state checkpoints (engine/train_state.hpp) and
// token caches (data/text_data.hpp) record for their files, so that a flipped byte, a file cut short under a
// matching size, or a file swapped for another is refused instead of trusted. Not a defence against an attacker
// (anyone can recompute a CRC): against disks, copies and hand edits.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tessera {

// CRC-32C of `bytes` (polynomial 0x1EDC6F41, reflected; "123456789" -> 0xE3069283). `crc` is the checksum of what
// came before, so crc32c(b, crc32c(a)) == crc32c(a followed by b). SSE4.2's crc32 instruction where the CPU has it
// (about 10 GB/s), else 8 bytes per table step (about 1 GB/s).
std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0);
std::uint32_t crc32c(std::string_view text, std::uint32_t crc = 0);

// "e3069283": the 8 lowercase hex digits files record. parse_crc32c is its inverse: nullopt for anything but exactly
// 8 lowercase hex digits.
std::string crc32c_hex(std::uint32_t crc);
std::optional<std::uint32_t> parse_crc32c(std::string_view text);

}  // namespace tessera
