// tests: core/crc32c.hpp: the standard check values, extension across calls, every alignment and length through
// both the 8-byte and the byte loop, and the hex form.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/crc32c.hpp"

using namespace tessera;

namespace {
// Bit by bit, straight from the definition: the reference the fast paths are checked against.
std::uint32_t crc32c_bitwise(const std::string& text) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (const unsigned char b : text) {
    c ^= b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? 0x82F63B78u : 0u);
  }
  return ~c;
}
}  // namespace

TEST_CASE("crc32c: the check values of RFC 3720 and the CRC catalogue", "[core]") {
  CHECK(crc32c(std::string_view("123456789")) == 0xE3069283u);
  CHECK(crc32c(std::string_view("")) == 0u);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);     // RFC 3720 B.4: 32 bytes of zeros
  CHECK(crc32c(std::string(32, '\xff')) == 0x62A8AB43u);   // 32 bytes of ones
}

TEST_CASE("crc32c: every length and alignment agrees with the bitwise definition, and extends", "[core]") {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  for (std::size_t offset = 0; offset < 9; ++offset)
    for (std::size_t length = 0; offset + length <= data.size(); length += 7) {
      const std::string piece = data.substr(offset, length);
      CHECK(crc32c(std::string_view(piece)) == crc32c_bitwise(piece));
    }
  const std::string_view all(data);
  for (std::size_t cut : {0, 1, 8, 13, 299, 300})
    CHECK(crc32c(all.substr(cut), crc32c(all.substr(0, cut))) == crc32c(all));
  std::string flipped = data;
  flipped[150] ^= 0x10;
  CHECK(crc32c(std::string_view(flipped)) != crc32c(all));
}

TEST_CASE("crc32c: the hex form and its parser", "[core]") {
  CHECK(crc32c_hex(0xE3069283u) == "e3069283");
  CHECK(crc32c_hex(0x1u) == "00000001");
  CHECK(parse_crc32c("e3069283") == 0xE3069283u);
  CHECK(parse_crc32c("00000001") == 1u);
  CHECK(!parse_crc32c("E3069283"));  // files record lowercase
  CHECK(!parse_crc32c("e306928"));
  CHECK(!parse_crc32c("e30692830"));
  CHECK(!parse_crc32c("e306928g"));
  CHECK(!parse_crc32c(""));
}
