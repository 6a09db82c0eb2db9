// tests: tessera::io::exif_orientation and oriented (io/image_orientation.hpp): the tag read from a JPEG's APP1
// Exif segment (both byte orders) and a PNG's eXIf chunk, malformed blocks read as 1, and the eight transposes on a
// 3x2 image whose pixels name their source (Pillow's results for ImageOps.exif_transpose, written out by hand).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "tessera/io/image_orientation.hpp"

using tessera::io::exif_orientation;
using tessera::io::oriented;
using tessera::io::RgbImage;

namespace {

// A TIFF block with IFD0 holding one entry: Orientation (SHORT) = value.
std::vector<std::uint8_t> tiff(std::uint16_t value, bool little) {
  const auto u16 = [&](std::uint16_t v) {
    return little ? std::vector<std::uint8_t>{static_cast<std::uint8_t>(v), static_cast<std::uint8_t>(v >> 8)}
                  : std::vector<std::uint8_t>{static_cast<std::uint8_t>(v >> 8), static_cast<std::uint8_t>(v)};
  };
  const auto order = static_cast<std::uint8_t>(little ? 'I' : 'M');
  std::vector<std::uint8_t> t{order, order};
  const auto add = [&](const std::vector<std::uint8_t>& v) { t.insert(t.end(), v.begin(), v.end()); };
  add(u16(42));
  add(little ? std::vector<std::uint8_t>{8, 0, 0, 0} : std::vector<std::uint8_t>{0, 0, 0, 8});  // IFD0 at 8
  add(u16(1));                                                                                  // one entry
  add(u16(0x0112));
  add(u16(3));
  add(little ? std::vector<std::uint8_t>{1, 0, 0, 0} : std::vector<std::uint8_t>{0, 0, 0, 1});
  add(u16(value));
  add({0, 0});
  add({0, 0, 0, 0});  // no next IFD
  return t;
}

std::vector<std::uint8_t> jpeg_with(const std::vector<std::uint8_t>& exif) {
  const std::size_t length = exif.size() + 8;
  std::vector<std::uint8_t> b{0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00,  // SOI, an empty APP0
                              0xFF, 0xE1, static_cast<std::uint8_t>(length >> 8), static_cast<std::uint8_t>(length),
                              'E',  'x',  'i',  'f',  0,    0};
  for (const std::uint8_t byte : exif) b.push_back(byte);
  for (const std::uint8_t byte : {0xFF, 0xDA, 0x00, 0x02, 0xFF, 0xD9}) b.push_back(byte);
  return b;
}

std::vector<std::uint8_t> png_with(const std::vector<std::uint8_t>& exif) {
  std::vector<std::uint8_t> b{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  const auto chunk = [&](const char* type, const std::vector<std::uint8_t>& data) {
    const std::size_t n = data.size();
    b.insert(b.end(), {static_cast<std::uint8_t>(n >> 24), static_cast<std::uint8_t>(n >> 16),
                       static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n)});
    b.insert(b.end(), type, type + 4);
    b.insert(b.end(), data.begin(), data.end());
    b.insert(b.end(), {0, 0, 0, 0});  // CRC: not checked here
  };
  chunk("IHDR", std::vector<std::uint8_t>(13, 0));
  chunk("eXIf", exif);
  chunk("IEND", {});
  return b;
}

// A w x h image whose pixel (x, y) is (x, y, 7).
RgbImage labelled(std::int64_t w, std::int64_t h) {
  RgbImage img{w, h, {}};
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      img.pixels.insert(img.pixels.end(), {static_cast<std::uint8_t>(x), static_cast<std::uint8_t>(y), 7});
  return img;
}

// The (x, y) of the source pixel at each output position, row by row.
std::vector<std::pair<int, int>> sources(const RgbImage& img) {
  std::vector<std::pair<int, int>> out;
  for (std::size_t i = 0; i < img.pixels.size(); i += 3) out.emplace_back(img.pixels[i], img.pixels[i + 1]);
  return out;
}

}  // namespace

TEST_CASE("exif_orientation reads JPEG APP1 and PNG eXIf, both byte orders", "[image_orientation]") {
  for (std::uint16_t v = 1; v <= 8; ++v) {
    CHECK(exif_orientation(jpeg_with(tiff(v, true))) == v);
    CHECK(exif_orientation(jpeg_with(tiff(v, false))) == v);
    CHECK(exif_orientation(png_with(tiff(v, true))) == v);
  }
  CHECK(exif_orientation(jpeg_with(tiff(9, true))) == 1);  // not an orientation
  CHECK(exif_orientation(jpeg_with(tiff(0, false))) == 1);
  auto cut = jpeg_with(tiff(6, true));
  cut.resize(20);  // the Exif segment cut short
  CHECK(exif_orientation(cut) == 1);
  CHECK(exif_orientation(std::vector<std::uint8_t>{0xFF, 0xD8}) == 1);
  CHECK(exif_orientation(std::vector<std::uint8_t>{}) == 1);
  CHECK(exif_orientation(std::vector<std::uint8_t>{'G', 'I', 'F', '8', '9', 'a'}) == 1);
}

TEST_CASE("oriented applies Pillow's eight transposes", "[image_orientation]") {
  // The 3x2 source:   (0,0) (1,0) (2,0)
  //                   (0,1) (1,1) (2,1)
  using P = std::vector<std::pair<int, int>>;
  const RgbImage img = labelled(3, 2);
  CHECK(sources(oriented(img, 1)) == P{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}});
  CHECK(sources(oriented(img, 2)) == P{{2, 0}, {1, 0}, {0, 0}, {2, 1}, {1, 1}, {0, 1}});  // FLIP_LEFT_RIGHT
  CHECK(sources(oriented(img, 3)) == P{{2, 1}, {1, 1}, {0, 1}, {2, 0}, {1, 0}, {0, 0}});  // ROTATE_180
  CHECK(sources(oriented(img, 4)) == P{{0, 1}, {1, 1}, {2, 1}, {0, 0}, {1, 0}, {2, 0}});  // FLIP_TOP_BOTTOM
  // 2x3 results.
  CHECK(sources(oriented(img, 5)) == P{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}});  // TRANSPOSE
  CHECK(sources(oriented(img, 6)) == P{{0, 1}, {0, 0}, {1, 1}, {1, 0}, {2, 1}, {2, 0}});  // ROTATE_270 (clockwise)
  CHECK(sources(oriented(img, 7)) == P{{2, 1}, {2, 0}, {1, 1}, {1, 0}, {0, 1}, {0, 0}});  // TRANSVERSE
  CHECK(sources(oriented(img, 8)) == P{{2, 0}, {2, 1}, {1, 0}, {1, 1}, {0, 0}, {0, 1}});  // ROTATE_90
  CHECK(oriented(img, 6).width == 2);
  CHECK(oriented(img, 6).height == 3);
}
