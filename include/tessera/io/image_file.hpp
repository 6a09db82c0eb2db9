#pragma once
// defines: reading PNG and JPEG images (stb_image) for the image data: probe_image checks a file's header without
// decoding it (the data checks every image before training starts), read_image decodes it to 8-bit RGB, as PIL's
// Image.open(...).convert("RGB") gives transformers' image processors.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace tessera::io {

struct ImageInfo {
  std::int64_t width = 0, height = 0, channels = 0;  // channels as stored (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)
};

struct RgbImage {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> pixels;  // height * width * 3, row-major, RGB interleaved
};

// FormatError naming the file and what stb_image found wrong (missing, unreadable, not PNG/JPEG, truncated header).
ImageInfo probe_image(const std::filesystem::path& path);
// FormatError as probe_image, and for data that does not decode.
RgbImage read_image(const std::filesystem::path& path);

}  // namespace tessera::io
