// implements: probe_image and read_image (io/image_file.hpp) on stb_image, compiled into this file only.
#include "tessera/io/image_file.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>

#include "tessera/core/error.hpp"

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO_WARNINGS
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#include <stb/stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace tessera::io {
namespace {

// Far larger than any training image, and small enough that width * height * 3 cannot overflow.
constexpr std::int64_t kMaxSide = 1 << 15;

[[noreturn]] void bad_image(const std::filesystem::path& path, const std::string& what) {
  throw FormatError(path.string() + ": " + what);
}

void check_readable(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) bad_image(path, "no such image file");
  if (!std::filesystem::is_regular_file(path, ec)) bad_image(path, "not a regular file");
}

}  // namespace

ImageInfo probe_image(const std::filesystem::path& path) {
  check_readable(path);
  int w = 0, h = 0, c = 0;
  if (!stbi_info(path.c_str(), &w, &h, &c)) {
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fclose(f);
      bad_image(path, std::string("not a PNG or JPEG image tessera can read (") + stbi_failure_reason() + ")");
    }
    bad_image(path, std::string("cannot open: ") + std::strerror(errno));
  }
  if (w <= 0 || h <= 0 || w > kMaxSide || h > kMaxSide)
    bad_image(path, "image of " + std::to_string(w) + "x" + std::to_string(h) + " pixels; each side must be 1 to " +
                        std::to_string(kMaxSide));
  return ImageInfo{w, h, c};
}

RgbImage read_image(const std::filesystem::path& path) {
  const ImageInfo info = probe_image(path);
  int w = 0, h = 0, c = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> data(stbi_load(path.c_str(), &w, &h, &c, 3), stbi_image_free);
  if (!data) bad_image(path, std::string("does not decode (") + stbi_failure_reason() + "); the file is corrupt");
  if (w != info.width || h != info.height) bad_image(path, "header and data disagree on the image size");
  RgbImage out;
  out.width = w;
  out.height = h;
  out.pixels.assign(data.get(), data.get() + static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3);
  return out;
}

}  // namespace tessera::io
