// implements: core/crc32c.hpp.
#include "tessera/core/crc32c.hpp"

#include <array>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define TESSERA_CRC32C_SSE42 1
#endif

namespace tessera {
namespace {

constexpr std::uint32_t kReflectedPolynomial = 0x82F63B78u;

// table[k][b]: the CRC of byte b followed by k zero bytes (slicing-by-8, Intel's "Slicing-by-8" paper).
constexpr std::array<std::array<std::uint32_t, 256>, 8> make_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kReflectedPolynomial : 0u);
    t[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  return t;
}
constexpr auto kTables = make_tables();

// c: the register (the checksum so far, inverted).
std::uint32_t update_tables(std::uint32_t c, const unsigned char* p, std::size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian: the first byte in the low bits, as the reflected CRC takes it
    word ^= c;
    c = kTables[7][word & 0xFF] ^ kTables[6][(word >> 8) & 0xFF] ^ kTables[5][(word >> 16) & 0xFF] ^
        kTables[4][(word >> 24) & 0xFF] ^ kTables[3][(word >> 32) & 0xFF] ^ kTables[2][(word >> 40) & 0xFF] ^
        kTables[1][(word >> 48) & 0xFF] ^ kTables[0][word >> 56];
  }
  for (; n > 0; ++p, --n) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFFu];
  return c;
}

#ifdef TESSERA_CRC32C_SSE42
__attribute__((target("sse4.2"))) std::uint32_t update_sse42(std::uint32_t c, const unsigned char* p, std::size_t n) {
  std::uint64_t c64 = c;
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
  }
  c = static_cast<std::uint32_t>(c64);
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(c, *p);
  return c;
}
bool has_sse42() {
  static const bool yes = [] {
    __builtin_cpu_init();  // needed before __builtin_cpu_supports in code that may run during static initialization
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return yes;
}
#endif

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
#ifdef TESSERA_CRC32C_SSE42
  if (has_sse42()) return ~update_sse42(~crc, p, bytes.size());
#endif
  return ~update_tables(~crc, p, bytes.size());
}

std::uint32_t crc32c(std::string_view text, std::uint32_t crc) {
  return crc32c(std::as_bytes(std::span<const char>(text.data(), text.size())), crc);
}

std::string crc32c_hex(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

std::optional<std::uint32_t> parse_crc32c(std::string_view text) {
  if (text.size() != 8) return std::nullopt;
  std::uint32_t value = 0;
  for (const char ch : text) {
    const int digit = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = value << 4 | static_cast<std::uint32_t>(digit);
  }
  return value;
}

}  // namespace tessera
