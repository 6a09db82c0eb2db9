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
std::optional<ImageInfo> probe_jpeg(std::span<const std::uint8_t> bytes, std::string_view what, bool prefix);
std::optional<ImageInfo> probe_png(std::span<const std::uint8_t> bytes, std::string_view what, bool prefix);

RgbImage decode_jpeg(std::span<const std::uint8_t> bytes, std::string_view what);
RgbImage decode_png(std::span<const std::uint8_t> bytes, std::string_view what);

}  // namespace tessera::io::detail
