// implements: exif_orientation and oriented (io/image_orientation.hpp).
#include "tessera/io/image_orientation.hpp"

#include <cstring>
#include <string_view>
#include <utility>

namespace tessera::io {
namespace {

// The Orientation (0x0112) of IFD0 of a TIFF-structured EXIF block, 1 when absent or malformed.
int tiff_orientation(std::span<const std::uint8_t> t) {
  if (t.size() < 8) return 1;
  const bool little = t[0] == 'I' && t[1] == 'I';
  if (!little && !(t[0] == 'M' && t[1] == 'M')) return 1;
  const auto u16 = [&](std::size_t at) -> std::uint32_t {
    return little ? t[at] | t[at + 1] << 8 : t[at] << 8 | t[at + 1];
  };
  const auto u32 = [&](std::size_t at) -> std::uint32_t {
    return little ? u16(at) | u16(at + 2) << 16 : u16(at) << 16 | u16(at + 2);
  };
  if (u16(2) != 42) return 1;
  const std::size_t ifd = u32(4);
  if (ifd + 2 > t.size()) return 1;
  const std::size_t entries = u16(ifd);
  for (std::size_t e = 0; e < entries; ++e) {
    const std::size_t at = ifd + 2 + 12 * e;
    if (at + 12 > t.size()) return 1;
    if (u16(at) != 0x0112) continue;
    const std::uint32_t type = u16(at + 2), value = type == 3 ? u16(at + 8) : type == 4 ? u32(at + 8) : 0;
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

int jpeg_orientation(std::span<const std::uint8_t> b) {
  std::size_t at = 2;  // after SOI
  while (at + 4 <= b.size() && b[at] == 0xFF) {
    const std::uint8_t marker = b[at + 1];
    if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length
      at += 2;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) break;  // the scan: no metadata after it
    const std::size_t length = static_cast<std::size_t>(b[at + 2]) << 8 | b[at + 3];
    if (length < 2 || at + 2 + length > b.size()) break;
    const auto segment = b.subspan(at + 4, length - 2);
    if (marker == 0xE1 && segment.size() >= 6 && std::memcmp(segment.data(), "Exif\0\0", 6) == 0)
      return tiff_orientation(segment.subspan(6));
    at += 2 + length;
  }
  return 1;
}

int png_orientation(std::span<const std::uint8_t> b) {
  std::size_t at = 8;
  while (at + 12 <= b.size()) {
    const std::size_t length = static_cast<std::size_t>(b[at]) << 24 | b[at + 1] << 16 | b[at + 2] << 8 | b[at + 3];
    if (length > b.size() - at - 12) break;
    const std::string_view type(reinterpret_cast<const char*>(b.data() + at + 4), 4);
    if (type == "eXIf") return tiff_orientation(b.subspan(at + 8, length));
    if (type == "IEND") break;
    at += 12 + length;
  }
  return 1;
}

}  // namespace

int exif_orientation(std::span<const std::uint8_t> bytes) {
  if (bytes.size() >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8) return jpeg_orientation(bytes);
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), "\x89PNG\r\n\x1a\n", 8) == 0) return png_orientation(bytes);
  return 1;
}

RgbImage oriented(RgbImage image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const std::int64_t w = image.width, h = image.height;
  const bool swaps = orientation >= 5;  // 5..8 exchange width and height
  RgbImage out{swaps ? h : w, swaps ? w : h, std::vector<std::uint8_t>(image.pixels.size())};
  for (std::int64_t y = 0; y < out.height; ++y) {
    for (std::int64_t x = 0; x < out.width; ++x) {
      std::int64_t sx = x, sy = y;  // the source pixel of output (x, y)
      switch (orientation) {
        case 2: sx = w - 1 - x; break;
        case 3: sx = w - 1 - x; sy = h - 1 - y; break;
        case 4: sy = h - 1 - y; break;
        case 5: sx = y; sy = x; break;
        case 6: sx = y; sy = h - 1 - x; break;
        case 7: sx = w - 1 - y; sy = h - 1 - x; break;
        case 8: sx = w - 1 - y; sy = x; break;
      }
      std::memcpy(&out.pixels[static_cast<std::size_t>((y * out.width + x) * 3)],
                  &image.pixels[static_cast<std::size_t>((sy * w + sx) * 3)], 3);
    }
  }
  return out;
}

}  // namespace tessera::io
