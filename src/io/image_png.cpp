// implements: probe_png and decode_png (image_codecs.hpp) on libpng, with Pillow 13's reading rules
// (PngImagePlugin.py, ZipDecode.c): CRCs checked before the image data and not in it, unknown chunks skipped, done
// once the last row is out whatever follows it; and Pillow's conversions to RGB from the raw samples (no libpng
// transforms).
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "image_codecs.hpp"

namespace tessera::io::detail {
namespace {

struct PngSource {
  std::span<const std::uint8_t> bytes;
  std::size_t pos = 0;
  bool ended = false;  // libpng asked for bytes past the end
};

struct PngErrors {
  char message[200] = {};
};

void on_error(png_structp png, png_const_charp message) {
  auto* errors = static_cast<PngErrors*>(png_get_error_ptr(png));
  std::snprintf(errors->message, sizeof errors->message, "%s", message);
  png_longjmp(png, 1);  // back to PngReader::guarded's setjmp; returning would make libpng print and abort
}

void on_warning(png_structp, png_const_charp) {}  // Pillow prints nothing either

void read_bytes(png_structp png, png_bytep out, std::size_t n) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (source->bytes.size() - source->pos < n) {
    source->ended = true;
    png_error(png, "the data ends here");
  }
  std::memcpy(out, source->bytes.data() + source->pos, n);
  source->pos += n;
}

// Pillow skips chunks it does not know, critical or not; libpng would refuse an unknown critical one.
int skip_unknown_chunk(png_structp, png_unknown_chunkp) { return 1; }

// Deflate's best ratio: a 258-byte match costs at least 2 bits.
constexpr std::uint64_t kMaxInflateRatio = 1032;

class PngReader {
 public:
  // byte_at_a_time: libpng reads the image data one byte at a time (slow), so that when the data ends, every row
  // the bytes before the end hold is decoded, as Pillow's decoder (fed what the file has) decodes them.
  PngReader(std::span<const std::uint8_t> bytes, std::string_view what, bool byte_at_a_time)
      : what_(what), byte_at_a_time_(byte_at_a_time), source_{bytes} {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, &errors_, on_error, on_warning);
    if (png_) info_ = png_create_info_struct(png_);
    if (!png_ || !info_) {
      png_destroy_read_struct(&png_, &info_, nullptr);
      bad_image(what_, "libpng cannot start (out of memory?)");
    }
    png_set_read_fn(png_, &source_, read_bytes);
    png_set_read_user_chunk_fn(png_, nullptr, skip_unknown_chunk);
    // Pillow has no limit per side (libpng's default is 10^6); check_image_size applies Pillow's pixel limit.
    png_set_user_limits(png_, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    // Pillow checks the CRC of every chunk before the first IDAT (a mismatch: "broken PNG file").
    png_set_crc_action(png_, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
    png_set_benign_errors(png_, 1);
    if (byte_at_a_time) png_set_compression_buffer_size(png_, 1);
  }
  ~PngReader() { png_destroy_read_struct(&png_, &info_, nullptr); }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

  // Runs f (libpng calls only) under the error handler; false when libpng gave up, errors_.message saying why.
  // Nothing with a destructor lives between this setjmp and on_error's longjmp, so the jump skips no destructor.
  template <class F>
  bool guarded(F&& f) {
    if (setjmp(png_jmpbuf(png_))) return false;
    f();
    return true;
  }

  // The chunks up to the first IDAT. False when the data ends inside them and `prefix` says more may follow.
  bool read_header(bool prefix) {
    if (!guarded([&] { png_read_info(png_, info_); })) {
      if (source_.ended && prefix) return false;
      if (source_.ended)
        bad_image(what_, "PNG header cut short: the data ends after " + std::to_string(source_.bytes.size()) +
                             " bytes, before the first IDAT chunk");
      bad_image(what_, std::string("corrupt PNG header: ") + errors_.message);
    }
    png_get_IHDR(png_, info_, &width_, &height_, &depth_, &color_, &interlace_, nullptr, nullptr);
    check_image_size(what_, width_, height_);
    return true;
  }

  ImageInfo info() const {
    switch (color_) {
      case PNG_COLOR_TYPE_GRAY: return {width_, height_, 1};
      case PNG_COLOR_TYPE_GRAY_ALPHA: return {width_, height_, 2};
      case PNG_COLOR_TYPE_RGB: return {width_, height_, 3};
      case PNG_COLOR_TYPE_RGB_ALPHA: return {width_, height_, 4};
      default: return {width_, height_, png_get_valid(png_, info_, PNG_INFO_tRNS) ? 4 : 3};
    }
  }

  // nullopt: the data ended inside the image data, rows short, but perhaps only because libpng asked for more than
  // the last row needed (read again byte at a time to know).
  std::optional<RgbImage> decode();

 private:
  int samples() const {
    switch (color_) {
      case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
      case PNG_COLOR_TYPE_RGB: return 3;
      case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
      default: return 1;  // gray, palette index
    }
  }
  void check_data_size() const;
  void to_rgb(const png_byte* row, std::uint8_t* out) const;
  void fail_rows(bool interlaced, int pass, png_uint_32 y, std::size_t row_bytes) const;

  std::string_view what_;
  bool byte_at_a_time_;
  PngSource source_;
  PngErrors errors_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
  png_uint_32 width_ = 0, height_ = 0;
  int depth_ = 0, color_ = 0, interlace_ = 0;
  std::uint8_t palette_[256][3] = {};  // Pillow's palette past PLTE's entries is black
};

// Refuses, before allocating for the image, IDAT chunks too short to inflate to its rows: a header claiming a
// large image over a few bytes of data (Pillow refuses those as truncated once it has read them).
void PngReader::check_data_size() const {
  const std::uint64_t bits = static_cast<std::uint64_t>(depth_) * static_cast<std::uint64_t>(samples());
  auto row_bytes = [&](std::uint64_t w) { return (w * bits + 7) / 8 + 1; };  // +1: the filter byte
  std::uint64_t needed = 0;
  if (interlace_ == PNG_INTERLACE_NONE) {
    needed = height_ * row_bytes(width_);
  } else {
    for (int pass = 0; pass < 7; ++pass) {
      const std::uint64_t cols = PNG_PASS_COLS(width_, pass), rows = PNG_PASS_ROWS(height_, pass);
      if (cols && rows) needed += rows * row_bytes(cols);
    }
  }
  // png_read_info stopped after the first IDAT's length and type: walk the IDAT chunks from there.
  std::uint64_t have = 0;
  std::size_t at = source_.pos - 8;
  const auto bytes = source_.bytes;
  while (at + 8 <= bytes.size() && std::memcmp(bytes.data() + at + 4, "IDAT", 4) == 0) {
    const std::uint64_t length = png_get_uint_32(bytes.data() + at);
    have += std::min<std::uint64_t>(length, bytes.size() - at - 8);
    at += 8 + length + 4;
  }
  if (needed > have * kMaxInflateRatio + kMaxInflateRatio)
    bad_image(what_, "PNG data cut short: its IDAT chunks hold " + std::to_string(have) + " bytes, too few for the " +
                         std::to_string(width_) + "x" + std::to_string(height_) + " image's " +
                         std::to_string(needed) + " bytes even at deflate's best ratio");
}

// One image row of raw samples (big-endian when 16-bit, packed when under 8) -> RGB, as Pillow unpacks the PNG
// mode (PngImagePlugin._MODES) and then converts it to RGB.
void PngReader::to_rgb(const png_byte* row, std::uint8_t* out) const {
  const int n = samples();
  auto sample = [&](png_uint_32 i) -> unsigned {  // sample i of the row, as stored
    if (depth_ == 8) return row[i];
    if (depth_ == 16) return static_cast<unsigned>(row[2 * i] << 8 | row[2 * i + 1]);
    const unsigned bit = i * static_cast<unsigned>(depth_);
    return (row[bit / 8] >> (8 - depth_ - bit % 8)) & ((1u << depth_) - 1);
  };
  // 16-bit RGB, RGBA and gray+alpha: Pillow's RGB;16B, RGBA;16B and LA;16B unpackers keep the high byte.
  auto high8 = [&](png_uint_32 i) -> std::uint8_t { return static_cast<std::uint8_t>(depth_ == 16 ? sample(i) >> 8
                                                                                                   : sample(i)); };
  for (png_uint_32 x = 0; x < width_; ++x, out += 3) {
    switch (color_) {
      case PNG_COLOR_TYPE_GRAY: {
        unsigned v = sample(x);
        if (depth_ == 16) v = std::min(v, 255u);  // mode I;16, whose convert("RGB") clips
        else if (depth_ < 8) v = v * (255u / ((1u << depth_) - 1));  // modes 1, L;2, L;4: scaled to 0..255
        out[0] = out[1] = out[2] = static_cast<std::uint8_t>(v);
        break;
      }
      case PNG_COLOR_TYPE_PALETTE: {
        const std::uint8_t* rgb = palette_[sample(x)];
        out[0] = rgb[0], out[1] = rgb[1], out[2] = rgb[2];
        break;
      }
      case PNG_COLOR_TYPE_GRAY_ALPHA:
        out[0] = out[1] = out[2] = high8(x * 2);
        break;
      default:  // RGB, RGBA: alpha dropped
        for (int c = 0; c < 3; ++c) out[c] = high8(x * static_cast<png_uint_32>(n) + static_cast<png_uint_32>(c));
    }
  }
}

// libpng gave up reading row y of `pass`: FormatError, unless the data ended where reading byte by byte may still
// reach the last row (then the caller reads again so).
void PngReader::fail_rows(bool interlaced, int pass, png_uint_32 y, std::size_t row_bytes) const {
  if (source_.ended) {
    // The bytes libpng asked for past the end: at most IDAT_read_size (8 KiB), which inflate to at most 1032 times
    // as many. Too few for the rows left: truncated for certain, and no second, slower read.
    const std::uint64_t unread = source_.bytes.size() - source_.pos;
    const std::uint64_t rows_left = static_cast<std::uint64_t>(height_ - y) * (row_bytes + 1);
    if (!byte_at_a_time_ && (interlaced || rows_left <= unread * kMaxInflateRatio)) return;
    bad_image(what_, "PNG data cut short: the file ends after " + std::to_string(source_.bytes.size()) +
                         " bytes, inside the image data (Pillow refuses a truncated image too)");
  }
  if (std::strcmp(errors_.message, "Not enough image data") == 0)
    bad_image(what_, "PNG data cut short: the IDAT chunks end before row " + std::to_string(y) + " of " +
                         std::to_string(height_) + (interlaced ? " in interlace pass " + std::to_string(pass + 1)
                                                               : std::string()));
  bad_image(what_, std::string("corrupt PNG data: ") + errors_.message);
}

std::optional<RgbImage> PngReader::decode() {
  check_data_size();
  if (color_ == PNG_COLOR_TYPE_PALETTE) {
    png_colorp entries = nullptr;
    int count = 0;
    png_get_PLTE(png_, info_, &entries, &count);
    for (int i = 0; i < std::min(count, 256); ++i)
      palette_[i][0] = entries[i].red, palette_[i][1] = entries[i].green, palette_[i][2] = entries[i].blue;
  }
  // Pillow reads the image data without checking CRCs (PngImageFile.load_read skips them).
  png_set_crc_action(png_, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
  int passes = 1;
  if (!guarded([&] {
        passes = png_set_interlace_handling(png_);
        png_read_update_info(png_, info_);
      }))
    bad_image(what_, std::string("corrupt PNG data: ") + errors_.message);
  const std::size_t row_bytes = png_get_rowbytes(png_, info_);
  const bool interlaced = passes > 1;
  // Adam7 fills every row in each pass: the whole image stays raw until the last pass; otherwise one row at a time.
  std::vector<png_byte> raw(row_bytes * (interlaced ? height_ : 1));
  RgbImage out;
  out.width = width_;
  out.height = height_;
  const std::size_t stride = static_cast<std::size_t>(width_) * 3;
  out.pixels.resize(stride * height_);
  bool complete = false;  // every row decoded
  for (int pass = 0; pass < passes && !complete; ++pass) {
    for (png_uint_32 y = 0; y < height_ && !complete; ++y) {
      png_bytep row = raw.data() + (interlaced ? row_bytes * y : 0);
      if (!guarded([&] { png_read_row(png_, row, nullptr); })) {
        // After the last row libpng reads on to the end of the compressed stream; Pillow stops at the last row, so
        // whatever goes wrong after it (data cut short, a bad checksum, extra data) leaves a whole image.
        complete = interlaced ? png_get_current_pass_number(png_) >= 7 : png_get_current_row_number(png_) >= height_;
        if (!complete) {
          fail_rows(interlaced, pass, y, row_bytes);  // throws, unless reading byte by byte may reach the last row
          return std::nullopt;
        }
      }
      if (!interlaced) to_rgb(row, out.pixels.data() + stride * y);
    }
  }
  if (interlaced)
    for (png_uint_32 y = 0; y < height_; ++y) to_rgb(raw.data() + row_bytes * y, out.pixels.data() + stride * y);
  return out;
}

}  // namespace

std::optional<ImageInfo> probe_png(std::span<const std::uint8_t> bytes, std::string_view what, bool prefix) {
  PngReader reader(bytes, what, /*byte_at_a_time=*/false);
  if (!reader.read_header(prefix)) return std::nullopt;
  return reader.info();
}

RgbImage decode_png(std::span<const std::uint8_t> bytes, std::string_view what) {
  {
    PngReader reader(bytes, what, /*byte_at_a_time=*/false);
    reader.read_header(/*prefix=*/false);
    if (auto image = reader.decode()) return std::move(*image);
  }
  // Cut short inside the image data, near the last row: libpng asks for the image data a chunk piece (8 KiB) at a
  // time, and asking past the end lost the bytes before it. Byte by byte, the rows those bytes hold decode.
  PngReader reader(bytes, what, /*byte_at_a_time=*/true);
  reader.read_header(/*prefix=*/false);
  return std::move(*reader.decode());  // byte by byte, decode() returns an image or throws
}

}  // namespace tessera::io::detail
