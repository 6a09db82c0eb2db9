// implements: probe_image, read_image and decode_image (io/image_file.hpp): the file side and the choice of decoder
// (image_jpeg.cpp, image_png.cpp) by the signature Pillow checks.
#include "tessera/io/image_file.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>

#include "image_codecs.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/input_file.hpp"

namespace tessera::io {
namespace detail {

void bad_image(std::string_view what, const std::string& message) {
  throw FormatError(std::string(what) + ": " + message);
}

void check_image_size(std::string_view what, std::int64_t width, std::int64_t height) {
  if (width <= 0 || height <= 0)
    bad_image(what, "image of " + std::to_string(width) + "x" + std::to_string(height) + " pixels; it has none");
  // Both sides are at most 2^31 here, so the product cannot overflow.
  if (width * height > kMaxImagePixels)
    bad_image(what, "image of " + std::to_string(width) + "x" + std::to_string(height) + " pixels, more than the " +
                        std::to_string(kMaxImagePixels) + " Pillow opens (2 * Image.MAX_IMAGE_PIXELS; it raises "
                        "DecompressionBombError)");
}

}  // namespace detail

namespace {

enum class Kind { png, jpeg };

// Pillow's own tests (PngImagePlugin._accept, JpegImagePlugin._accept): the 8-byte PNG signature, JPEG's SOI and
// the 0xFF of the next marker.
Kind kind_of(std::span<const std::uint8_t> bytes, std::string_view what) {
  static constexpr std::uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static constexpr std::uint8_t jpeg[] = {0xff, 0xd8, 0xff};
  if (bytes.empty()) detail::bad_image(what, "empty (0 bytes); not a PNG or JPEG image");
  if (bytes.size() >= sizeof png && std::equal(png, png + sizeof png, bytes.begin())) return Kind::png;
  if (bytes.size() >= sizeof jpeg && std::equal(jpeg, jpeg + sizeof jpeg, bytes.begin())) return Kind::jpeg;
  std::string head;
  for (std::size_t i = 0; i < std::min<std::size_t>(bytes.size(), 8); ++i) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%02x ", bytes[i]);
    head += hex;
  }
  head.pop_back();
  detail::bad_image(what, "not a PNG or JPEG image tessera can read (it starts with the bytes " + head +
                              "; a PNG starts with 89 50 4e 47 0d 0a 1a 0a, a JPEG with ff d8 ff)");
}

// `total_bytes`: the whole file's size, of which `bytes` may be the start (`prefix`).
std::optional<ImageInfo> probe_bytes(std::span<const std::uint8_t> bytes, std::string_view what, bool prefix,
                                     std::uint64_t total_bytes) {
  if (prefix && bytes.size() < 8) return std::nullopt;
  return kind_of(bytes, what) == Kind::png ? detail::probe_png(bytes, what, prefix)
                                           : detail::probe_jpeg(bytes, what, prefix, total_bytes);
}

// Up to `limit` bytes of the file (all of it when limit is 0), whether that is all of it, and the file's size.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path, std::size_t limit, bool& whole,
                                    std::uint64_t& file_bytes) {
  InputFile in(path);  // a FIFO or device refused, without blocking
  if (!in.is_open())
    detail::bad_image(path.string(), in.problem() == "no such file" ? "no such image file" : in.problem());
  file_bytes = static_cast<std::uint64_t>(in.size());
  std::vector<std::uint8_t> bytes;
  if (limit == 0) bytes.reserve(static_cast<std::size_t>(in.size()) + 1);
  constexpr std::size_t kBlock = 1 << 16;
  for (;;) {
    const std::size_t want = limit ? limit - bytes.size() : kBlock;
    if (want == 0) break;
    const std::size_t old = bytes.size();
    bytes.resize(old + want);
    in.read(reinterpret_cast<char*>(bytes.data() + old), static_cast<std::streamsize>(want));
    const auto got = static_cast<std::size_t>(in.gcount());
    bytes.resize(old + got);
    if (got < want) {
      whole = true;
      return bytes;
    }
  }
  whole = in.peek() == std::char_traits<char>::eof();
  return bytes;
}

std::atomic<std::int64_t> decoded{0};

}  // namespace

ImageInfo probe_image(std::span<const std::uint8_t> bytes, std::string_view what) {
  return *probe_bytes(bytes, what, /*prefix=*/false, bytes.size());
}

ImageInfo probe_image(const std::filesystem::path& path) {
  // The header of a photo is a few KiB; EXIF thumbnails and ICC profiles can push a JPEG's past 64 KiB.
  bool whole = false;
  std::uint64_t file_bytes = 0;
  const std::vector<std::uint8_t> head = read_file(path, 1 << 16, whole, file_bytes);
  if (auto info = probe_bytes(head, path.string(), !whole, whole ? head.size() : file_bytes)) return *info;
  const std::vector<std::uint8_t> all = read_file(path, 0, whole, file_bytes);
  return *probe_bytes(all, path.string(), /*prefix=*/false, all.size());
}

RgbImage decode_image(std::span<const std::uint8_t> bytes, std::string_view what) {
  decoded.fetch_add(1, std::memory_order_relaxed);
  return kind_of(bytes, what) == Kind::png ? detail::decode_png(bytes, what) : detail::decode_jpeg(bytes, what);
}

RgbImage read_image(const std::filesystem::path& path) {
  bool whole = false;
  std::uint64_t file_bytes = 0;
  const std::vector<std::uint8_t> bytes = read_file(path, 0, whole, file_bytes);
  return decode_image(bytes, path.string());
}

std::int64_t detail::images_decoded() { return decoded.load(std::memory_order_relaxed); }

}  // namespace tessera::io
