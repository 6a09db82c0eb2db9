#pragma once
// defines: reading PNG and JPEG images for the image data, from a file or from bytes in memory (a row of an Arrow or
// Parquet table). probe_image checks the header without decoding (the data checks every image before training
// starts); read_image / decode_image decode to 8-bit RGB with the same pixel values, byte for byte, as the labs'
// Pillow 13 gives for Image.open(...).convert("RGB"): JPEG through libjpeg-turbo (islow DCT, fancy upsampling, as
// Pillow's own libjpeg-turbo decodes by default), PNG through libpng, then Pillow's conversions to RGB:
//   gray, 1/2/4-bit gray scaled to 0..255   R = G = B = gray
//   16-bit gray (Pillow's I;16)             clipped to 255 (values 256..65535 become 255), not scaled
//   16-bit RGB, RGBA, gray+alpha            the high byte of each sample
//   alpha (LA, RGBA, tRNS)                  dropped, not composited
//   palette                                 the PLTE colour; an index past the palette is black
//   CMYK / YCCK JPEG                        read as Adobe's inverted CMYK, then Pillow's CMYK -> RGB: with the
//                                           stored C and K, R = K - (255 - C) * K / 255 (Pillow's rounding)
// EXIF orientation is not applied, as Image.open does not apply it, nor do the image processors given a PIL image;
// datasets' Image feature (5.x) and transformers' load_image(path) do (ImageOps.exif_transpose), so their images
// differ from these when an Orientation tag is other than 1. ICC profiles and gamma are not applied (nor by Pillow).
// tests/reference/check_images.py holds the two against each other on ~330 generated and damaged images.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace tessera::io {

struct ImageInfo {
  // channels as stored: 1 gray, 2 gray+alpha, 3 RGB / YCbCr / palette, 4 RGBA / CMYK / palette with tRNS
  std::int64_t width = 0, height = 0, channels = 0;
};

struct RgbImage {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> pixels;  // height * width * 3, row-major, RGB interleaved
};

// Images of more pixels than Pillow opens (2 * Image.MAX_IMAGE_PIXELS: it raises DecompressionBombError) are refused.
inline constexpr std::int64_t kMaxImagePixels = 2 * 89'478'485LL;

// FormatError naming the file and what is wrong: missing, unreadable, empty, not PNG/JPEG, a header that is cut
// short or breaks its format, a size of 0 or over kMaxImagePixels. Reads the file's first 64 KiB (all of it when the
// header is longer).
ImageInfo probe_image(const std::filesystem::path& path);
// The same for bytes in memory; `what` names their source in errors ("x.arrow row 17 column image").
ImageInfo probe_image(std::span<const std::uint8_t> bytes, std::string_view what);

// FormatError as probe_image, and for data that does not decode: cut short (a truncated file, as Pillow refuses
// without ImageFile.LOAD_TRUNCATED_IMAGES) or corrupt (libjpeg's or libpng's message). Corrupt JPEG entropy data
// that libjpeg only warns about ("extraneous bytes before marker", "bad Huffman code") decodes as Pillow gives it.
RgbImage read_image(const std::filesystem::path& path);
RgbImage decode_image(std::span<const std::uint8_t> bytes, std::string_view what);

namespace detail {
// How many images read_image / decode_image have decoded in this process: what tests count an epoch's decodes by.
std::int64_t images_decoded();
}  // namespace detail

}  // namespace tessera::io
