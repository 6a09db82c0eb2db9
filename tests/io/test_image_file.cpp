// tests: io/image_file.hpp: PNG and JPEG decoded to RGB as Pillow's convert("RGB") gives them (the full comparison
// with Pillow is tests/reference/check_images.py), from bytes and from files, and the refusals, each naming the
// source and what is wrong: empty, not an image, cut short, corrupt, too large, missing.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/image_file.hpp"

#include "stb_image_write.hpp"

using namespace tessera::io;
using Catch::Contains;
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

// A w x h PNG of `channels` 8-bit samples per pixel (stb_image_write: zlib, one IDAT chunk).
Bytes png(int w, int h, int channels, const Bytes& samples) {
  Bytes out;
  auto append = [](void* context, void* data, int size) {
    auto* bytes = static_cast<Bytes*>(context);
    bytes->insert(bytes->end(), static_cast<std::uint8_t*>(data), static_cast<std::uint8_t*>(data) + size);
  };
  REQUIRE(stbi_write_png_to_func(append, &out, w, h, channels, samples.data(), w * channels));
  return out;
}

Bytes hex(const std::string& text) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

// JPEGs written by Pillow 13 (optimize=True, quality=90), each of one colour, with the RGB Pillow decodes them to.
// 8x8 L of 77: 77.
const Bytes kGrayJpeg = hex(
    "ffd8ffe000104a46494600010100000100010000ffdb0043000302020302020303030304030304050805050404050a070706080c0a0c0c0b"
    "0a0b0b0d0e12100d0e110e0b0b1016101113141515150c0f171816141812141514ffc0000b080008000801011100ffc40014000100000000"
    "000000000000000000000008ffc40014100100000000000000000000000000000000ffda0008010100003f003bbfffd9");
// 16x16 RGB (200, 30, 60), YCbCr 4:2:0: (200, 30, 59), libjpeg's YCbCr round trip.
const Bytes kColorJpeg = hex(
    "ffd8ffe000104a46494600010100000100010000ffdb0043000302020302020303030304030304050805050404050a070706080c0a0c0c0b"
    "0a0b0b0d0e12100d0e110e0b0b1016101113141515150c0f171816141812141514ffdb00430103040405040509050509140d0b0d14141414"
    "14141414141414141414141414141414141414141414141414141414141414141414141414141414141414141414ffc00011080010001003"
    "012200021101031101ffc4001500010100000000000000000000000000000007ffc40014100100000000000000000000000000000000ffc4"
    "001501010100000000000000000000000000000608ffc40014110100000000000000000000000000000000ffda000c03010002110311003f"
    "00850034b75fffd9");
// 8x8 CMYK (10, 200, 30, 40), Adobe-inverted in the file: (207, 46, 190) by Pillow's CMYK -> RGB.
const Bytes kCmykJpeg = hex(
    "ffd8ffee000e41646f626500640000000000ffdb0043000302020302020303030304030304050805050404050a070706080c0a0c0c0b0a0b"
    "0b0d0e12100d0e110e0b0b1016101113141515150c0f171816141812141514ffc000140800080008044311004d11005911004b1100ffc400"
    "1500010100000000000000000000000000000809ffc40014100100000000000000000000000000000000ffda000e0443004d0059004b0000"
    "3f00a701e2819d0fffd9");

void check_all_pixels(const RgbImage& image, std::int64_t w, std::int64_t h, std::uint8_t r, std::uint8_t g,
                      std::uint8_t b) {
  REQUIRE(image.width == w);
  REQUIRE(image.height == h);
  REQUIRE(image.pixels.size() == static_cast<std::size_t>(w * h * 3));
  for (std::size_t i = 0; i < image.pixels.size(); i += 3) {
    CHECK(image.pixels[i] == r);
    CHECK(image.pixels[i + 1] == g);
    CHECK(image.pixels[i + 2] == b);
  }
}

std::uint32_t crc32(const std::uint8_t* data, std::size_t n) {
  std::uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A PNG chunk: length, type, data, CRC (big-endian).
Bytes chunk(const std::string& type, const Bytes& data) {
  Bytes out(4 + 4 + data.size() + 4);
  auto put32 = [&](std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
  };
  put32(0, static_cast<std::uint32_t>(data.size()));
  for (std::size_t i = 0; i < 4; ++i) out[4 + i] = static_cast<std::uint8_t>(type[i]);
  for (std::size_t i = 0; i < data.size(); ++i) out[8 + i] = data[i];
  put32(8 + data.size(), crc32(out.data() + 4, 4 + data.size()));
  return out;
}

// The signature and an IHDR of w x h 8-bit RGB.
Bytes png_header(std::uint32_t w, std::uint32_t h) {
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  for (std::uint32_t v : {w, h})
    for (int shift = 24; shift >= 0; shift -= 8) ihdr.push_back(static_cast<std::uint8_t>(v >> shift));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  const Bytes c = chunk("IHDR", ihdr);
  out.insert(out.end(), c.begin(), c.end());
  return out;
}

}  // namespace

TEST_CASE("decode_image reads an RGB PNG exactly, and probe_image its size and channels", "[io][image_file]") {
  Bytes samples(5 * 3 * 3);
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<std::uint8_t>(i * 17);
  const Bytes file = png(5, 3, 3, samples);
  const ImageInfo info = probe_image(file, "mem.png");
  CHECK(info.width == 5);
  CHECK(info.height == 3);
  CHECK(info.channels == 3);
  const RgbImage image = decode_image(file, "mem.png");
  CHECK(image.width == 5);
  CHECK(image.height == 3);
  CHECK(image.pixels == samples);
}

TEST_CASE("decode_image turns gray, gray+alpha and RGBA PNGs into RGB as Pillow converts them", "[io][image_file]") {
  const Bytes gray = {0, 50, 255, 7};
  check_all_pixels(decode_image(png(1, 1, 1, {50}), "gray"), 1, 1, 50, 50, 50);
  const RgbImage g = decode_image(png(2, 2, 1, gray), "gray");
  CHECK(g.pixels == Bytes{0, 0, 0, 50, 50, 50, 255, 255, 255, 7, 7, 7});
  // Alpha is dropped, not composited onto a background: Pillow's LA -> RGB and RGBA -> RGB.
  const RgbImage la = decode_image(png(2, 1, 2, {9, 0, 200, 128}), "gray+alpha");
  CHECK(la.pixels == Bytes{9, 9, 9, 200, 200, 200});
  const RgbImage rgba = decode_image(png(2, 1, 4, {1, 2, 3, 0, 4, 5, 6, 255}), "rgba");
  CHECK(rgba.pixels == Bytes{1, 2, 3, 4, 5, 6});
  CHECK(probe_image(png(2, 1, 4, {1, 2, 3, 0, 4, 5, 6, 255}), "rgba").channels == 4);
}

TEST_CASE("decode_image reads gray, YCbCr 4:2:0 and CMYK JPEGs to the RGB Pillow gives", "[io][image_file]") {
  check_all_pixels(decode_image(kGrayJpeg, "gray.jpg"), 8, 8, 77, 77, 77);
  check_all_pixels(decode_image(kColorJpeg, "color.jpg"), 16, 16, 200, 30, 59);
  check_all_pixels(decode_image(kCmykJpeg, "cmyk.jpg"), 8, 8, 207, 46, 190);
  CHECK(probe_image(kGrayJpeg, "gray.jpg").channels == 1);
  CHECK(probe_image(kColorJpeg, "color.jpg").channels == 3);
  CHECK(probe_image(kCmykJpeg, "cmyk.jpg").channels == 4);
}

TEST_CASE("read_image and probe_image read files as decode_image reads their bytes", "[io][image_file]") {
  const fs::path dir = tessera::testing::fresh_dir("image_file");
  std::ofstream(dir / "a.jpg", std::ios::binary)
      .write(reinterpret_cast<const char*>(kColorJpeg.data()), static_cast<std::streamsize>(kColorJpeg.size()));
  CHECK(probe_image(dir / "a.jpg").width == 16);
  CHECK(read_image(dir / "a.jpg").pixels == decode_image(kColorJpeg, "a.jpg").pixels);
  CHECK_THROWS_MATCHES(read_image(dir / "missing.png"), tessera::FormatError,
                       Catch::Matchers::Message((dir / "missing.png").string() + ": no such image file"));
  CHECK_THROWS_WITH(probe_image(dir), Contains("is a directory, not a file"));
}

TEST_CASE("an empty span, random bytes and text are refused as no PNG or JPEG, naming the source",
          "[io][image_file]") {
  const std::string what = "data/x/data-00000-of-00001.arrow row 17 column image";
  CHECK_THROWS_MATCHES(decode_image(std::span<const std::uint8_t>(), what), tessera::FormatError,
                       Catch::Matchers::Message(what + ": empty (0 bytes); not a PNG or JPEG image"));
  CHECK_THROWS_MATCHES(probe_image(std::span<const std::uint8_t>(), what), tessera::FormatError,
                       Catch::Matchers::Message(what + ": empty (0 bytes); not a PNG or JPEG image"));
  const Bytes noise = {0x13, 0x7f, 0xee, 0x01, 0x99, 0x42, 0x00, 0x05, 0x80, 0x80, 0x11};
  CHECK_THROWS_WITH(decode_image(noise, what), Contains(what + ": not a PNG or JPEG image tessera can read (it "
                                                               "starts with the bytes 13 7f ee 01 99 42 00 05;"));
  const std::string text = "GIF89a is not read";
  CHECK_THROWS_WITH(probe_image(Bytes(text.begin(), text.end()), "x.gif"), Contains("x.gif: not a PNG or JPEG image"));
}

TEST_CASE("truncated PNG and JPEG data is refused as cut short, as Pillow refuses it", "[io][image_file]") {
  Bytes samples(40 * 30 * 3);
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<std::uint8_t>((i * 7919) >> 3);
  const Bytes file = png(40, 30, 3, samples);
  const Bytes half(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(file.size() / 2));
  CHECK(probe_image(half, "half.png").width == 40);  // the header is whole
  CHECK_THROWS_WITH(decode_image(half, "half.png"), Contains("half.png: PNG data cut short"));
  const Bytes header_only(file.begin(), file.begin() + 20);
  CHECK_THROWS_WITH(probe_image(header_only, "h.png"), Contains("h.png: PNG header cut short: the data ends after "
                                                                "20 bytes"));
  // Without IEND (12 bytes) every row is there: Pillow opens it, and so does tessera.
  const Bytes no_iend(file.begin(), file.end() - 12);
  CHECK(decode_image(no_iend, "no_iend.png").pixels == samples);

  const Bytes cut_jpeg(kColorJpeg.begin(), kColorJpeg.end() - 4);  // into the scan data
  CHECK_THROWS_WITH(decode_image(cut_jpeg, "cut.jpg"), Contains("cut.jpg: JPEG data cut short: the file ends after 0 "
                                                                "of 16 rows"));
  const Bytes cut_header(kColorJpeg.begin(), kColorJpeg.begin() + 100);
  CHECK_THROWS_WITH(probe_image(cut_header, "head.jpg"), Contains("head.jpg: JPEG header cut short"));
}

TEST_CASE("a PNG header with garbage IDAT data, and a bad CRC before it, are refused as corrupt", "[io][image_file]") {
  Bytes file = png_header(4, 4);
  const Bytes garbage = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a};
  for (const Bytes& c : {chunk("IDAT", garbage), chunk("IEND", {})}) file.insert(file.end(), c.begin(), c.end());
  CHECK(probe_image(file, "g.png").width == 4);
  CHECK_THROWS_WITH(decode_image(file, "g.png"), Contains("g.png: corrupt PNG data: IDAT:"));
  Bytes bad_crc = file;
  bad_crc[29] ^= 1;  // IHDR's CRC: Pillow refuses it ("broken PNG file")
  CHECK_THROWS_WITH(probe_image(bad_crc, "crc.png"), Contains("crc.png: corrupt PNG header: IHDR: CRC error"));
}

TEST_CASE("an image over Pillow's pixel limit is refused from its header, before any decoding", "[io][image_file]") {
  Bytes file = png_header(20000, 20000);  // 4e8 pixels: Pillow raises DecompressionBombError
  const Bytes idat = chunk("IDAT", {0x78, 0x9c, 0x03, 0x00});
  file.insert(file.end(), idat.begin(), idat.end());
  CHECK_THROWS_WITH(probe_image(file, "bomb.png"), Contains("bomb.png: image of 20000x20000 pixels, more than the "
                                                            "178956970 Pillow opens"));
  CHECK_THROWS_WITH(decode_image(file, "bomb.png"), Contains("DecompressionBombError"));
  // Under the limit but with far too little data for its rows: refused before allocating for them.
  Bytes big = png_header(10000, 10000);
  big.insert(big.end(), idat.begin(), idat.end());
  CHECK_THROWS_WITH(decode_image(big, "big.png"),
                    Contains("big.png: PNG data cut short: its IDAT chunks hold 4 bytes"));
}

namespace {

// `jpeg` with the size in its SOF0 marker replaced: what a hostile or cut-down file claims.
Bytes with_jpeg_size(Bytes jpeg, std::uint16_t width, std::uint16_t height) {
  for (std::size_t i = 0; i + 8 < jpeg.size(); ++i)
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {
      jpeg[i + 5] = static_cast<std::uint8_t>(height >> 8), jpeg[i + 6] = static_cast<std::uint8_t>(height);
      jpeg[i + 7] = static_cast<std::uint8_t>(width >> 8), jpeg[i + 8] = static_cast<std::uint8_t>(width);
      return jpeg;
    }
  FAIL("no SOF0 marker");
  return jpeg;
}

}  // namespace

TEST_CASE("a JPEG whose file cannot hold the pixels its header claims is refused before decoding", "[io][image_file]") {
  // Once: 1.5 KB claiming 13000x13000 pixels decoded from made-up zeros, 1.3 GB on every read. Every 8x8 block of a
  // Huffman-coded JPEG takes at least a bit: a file of N bytes holds at most 512 N pixels.
  const Bytes bomb = with_jpeg_size(kGrayJpeg, 4000, 4000);
  const std::string expected = "bomb.jpg: JPEG of 4000x4000 pixels in a file of " + std::to_string(bomb.size()) +
                               " bytes, which cannot hold them (each 8x8 block takes at least one bit, so at most " +
                               std::to_string(512 * bomb.size()) + " pixels); the file is cut short or its header is "
                               "false";
  CHECK_THROWS_MATCHES(probe_image(bomb, "bomb.jpg"), tessera::FormatError, Catch::Matchers::Message(expected));
  CHECK_THROWS_MATCHES(decode_image(bomb, "bomb.jpg"), tessera::FormatError, Catch::Matchers::Message(expected));
  const fs::path dir = tessera::testing::fresh_dir("image_file");
  std::ofstream(dir / "bomb.jpg", std::ios::binary)
      .write(reinterpret_cast<const char*>(bomb.data()), static_cast<std::streamsize>(bomb.size()));
  CHECK_THROWS_WITH(probe_image(dir / "bomb.jpg"), Contains("bomb.jpg: JPEG of 4000x4000 pixels in a file of"));
  CHECK_THROWS_WITH(read_image(dir / "bomb.jpg"), Contains("bomb.jpg: JPEG of 4000x4000 pixels in a file of"));
  // Under the bound the header passes.
  const auto side = static_cast<std::uint16_t>(8 * (kGrayJpeg.size() / 8));  // side^2 <= 512 * size
  CHECK(probe_image(with_jpeg_size(kGrayJpeg, side, 8), "edge.jpg").width == side);
  fs::remove_all(dir);
}

TEST_CASE("32768 pixels a side is refused alike for PNG and JPEG, from the header, by Pillow's pixel limit",
          "[io][image_file]") {
  // One rule for both formats, at the start of a run (probe_image) as in the middle (decode_image).
  Bytes png = png_header(32768, 32768);
  const Bytes idat = chunk("IDAT", {0x78, 0x9c, 0x03, 0x00});
  png.insert(png.end(), idat.begin(), idat.end());
  const Bytes jpeg = with_jpeg_size(kGrayJpeg, 32768, 32768);
  for (const auto& [bytes, name] : {std::pair{png, "side.png"}, std::pair{jpeg, "side.jpg"}}) {
    const std::string expected =
        std::string(name) + ": image of 32768x32768 pixels, more than the 178956970 Pillow opens";
    CHECK_THROWS_WITH(probe_image(bytes, name), Contains(expected));
    CHECK_THROWS_WITH(decode_image(bytes, name), Contains(expected));
  }
}
