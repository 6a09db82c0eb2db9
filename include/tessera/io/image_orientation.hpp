#pragma once
// defines: the EXIF orientation of an encoded image and its application, as datasets' Image feature decodes a
// table's images for the labs (datasets 5.x: when the image's EXIF has an Orientation tag, PIL.ImageOps.
// exif_transpose). exif_orientation reads the tag of a JPEG's first APP1 "Exif" segment or a PNG's eXIf chunk (1 when
// there is none or it is not 1..8); oriented applies it, Pillow's transposes:
//   2 mirror left-right   3 rotate 180          4 mirror top-bottom   5 transpose (swap rows and columns)
//   6 rotate 90 clockwise 7 transverse          8 rotate 90 counter-clockwise
// (io/image_file.hpp's decode_image leaves orientation alone, as Image.open does.)
#include <cstdint>
#include <span>

#include "tessera/io/image_file.hpp"

namespace tessera::io {

int exif_orientation(std::span<const std::uint8_t> bytes);
RgbImage oriented(RgbImage image, int orientation);

}  // namespace tessera::io
