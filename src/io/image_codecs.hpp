#pragma once
// defines: the two decoders behind io/image_file.hpp (image_jpeg.cpp on libjpeg-turbo, image_png.cpp on libpng) and
// what they share. Private to src/io.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tessera/io/image_file.hpp"

namespace tessera::io::detail {

// FormatError "<what>: <message>".
[[noreturn]] void bad_image(std::string_view what, const std::string& message);
// FormatError unless the image has at least one pixel and at most kMaxImagePixels.
void check_image_size(std::string_view what, std::int64_t width, std::int64_t height);

// The header. `prefix`: the bytes are the start of a longer file; then nullopt when they end inside the header (the
// caller reads the rest and asks again), where otherwise the header is cut short (FormatError).
// `total_bytes`: the size of the whole file, which a Huffman-coded JPEG's pixels are checked against: every 8x8 block
// of its first component takes at least one bit (a Huffman code is never shorter), so P pixels need at least P / 512
// bytes; a file of fewer cannot hold its image (once: a 1.5 KB JPEG claiming 13000x13000 pixels decoded from
// made-up zeros, 1.3 GB, on every read).
inline constexpr std::int64_t kMaxJpegPixelsPerByte = 512;
std::optional<ImageInfo> probe_jpeg(std::span<const std::uint8_t> bytes, std::string_view what, bool prefix,
                                    std::uint64_t total_bytes);
std::optional<ImageInfo> probe_png(std::span<const std::uint8_t> bytes, std::string_view what, bool prefix);

RgbImage decode_jpeg(std::span<const std::uint8_t> bytes, std::string_view what);
RgbImage decode_png(std::span<const std::uint8_t> bytes, std::string_view what);

}  // namespace tessera::io::detail
