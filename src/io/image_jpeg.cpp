// implements: probe_jpeg and decode_jpeg (image_codecs.hpp) on libjpeg-turbo, driven as Pillow 13's JpegDecode.c
// drives it, so that the pixels are Pillow's: the same output colour space per component count, libjpeg's default
// islow DCT and fancy upsampling, warnings ignored, the data's end before the last row an error.
#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdio>  // jpeglib.h uses FILE and size_t without including their headers
#include <string>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

#include "image_codecs.hpp"

// IJG's libjpeg 9 upsamples chroma another way (and libjpeg 6b/8 lack turbo's fixes): only libjpeg-turbo gives
// Pillow's pixels.
#ifndef LIBJPEG_TURBO_VERSION_NUMBER
#error "tessera decodes JPEG with libjpeg-turbo, as Pillow does; install libjpeg62-turbo-dev (scripts/install-deps.sh)"
#endif

namespace tessera::io::detail {
namespace {

// libjpeg's error manager with room for what the callbacks report back.
struct JpegErrors {
  jpeg_error_mgr pub;  // first member: libjpeg hands the callbacks &pub as cinfo->err
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  // libjpeg asked for bytes past the end (JWRN_JPEG_EOF; its memory source then makes up an EOI marker and the rest
  // decodes as gray). Pillow's suspending source stops at that same request: an error unless every row is out.
  bool data_ended;
};

// error_exit must not return (libjpeg would call exit()): back to the setjmp of JpegReader::guarded.
void on_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (level -1) and traces: Pillow's decoder shows none and goes on ("Corrupt JPEG data: N extraneous bytes
// before marker" is common in scraped photos and harmless), and so does tessera.
void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) reinterpret_cast<JpegErrors*>(cinfo->err)->data_ended = true;
}

void no_output(j_common_ptr) {}

class JpegReader {
 public:
  // total_bytes: the whole file's size, of which `bytes` may be the start.
  JpegReader(std::span<const std::uint8_t> bytes, std::string_view what, std::uint64_t total_bytes)
      : what_(what), size_(bytes.size()), total_bytes_(total_bytes) {
    cinfo_.err = jpeg_std_error(&errors_.pub);
    errors_.pub.error_exit = on_error;
    errors_.pub.emit_message = on_message;
    errors_.pub.output_message = no_output;
    if (!guarded([&] {
          jpeg_create_decompress(&cinfo_);
          jpeg_mem_src(&cinfo_, bytes.data(), static_cast<unsigned long>(bytes.size()));
        }))
      bad_image(what_, std::string("libjpeg cannot start: ") + errors_.message);
  }
  ~JpegReader() { jpeg_destroy_decompress(&cinfo_); }
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;

  jpeg_decompress_struct& cinfo() { return cinfo_; }
  bool data_ended() const { return errors_.data_ended; }

  // Runs f (libjpeg calls only) under the error handler; false when libjpeg gave up, errors_.message saying why.
  // Nothing with a destructor lives between this setjmp and on_error's longjmp (f's frame and libjpeg's C frames),
  // so the jump skips no destructor: the condition under which longjmp is defined in C++.
  template <class F>
  bool guarded(F&& f) {
    if (setjmp(errors_.jump)) return false;
    f();
    return true;
  }

  // The markers up to the first scan, as Pillow reads them (tables-only datastreams skipped). False when the data
  // ends inside them and `prefix` says more may follow; FormatError when the header is cut short or broken.
  bool read_header(bool prefix) {
    int status = JPEG_HEADER_OK;
    const bool ok = guarded([&] {
      do status = jpeg_read_header(&cinfo_, FALSE);
      while (status == JPEG_HEADER_TABLES_ONLY && !errors_.data_ended);
    });
    if (errors_.data_ended) {
      if (prefix) return false;
      bad_image(what_, "JPEG header cut short: the data ends after " + std::to_string(size_) +
                           " bytes, before the first scan of the image");
    }
    if (!ok) bad_image(what_, std::string("corrupt JPEG header: ") + errors_.message);
    if (status != JPEG_HEADER_OK) bad_image(what_, "JPEG data without an image (only tables)");
    const int n = cinfo_.num_components;
    if (n != 1 && n != 3 && n != 4)
      bad_image(what_, "JPEG of " + std::to_string(n) + " components; Pillow reads 1 (gray), 3 (YCbCr or RGB) and 4 "
                       "(CMYK or YCCK)");
    check_image_size(what_, cinfo_.image_width, cinfo_.image_height);
    // Arithmetic coding has no such floor (a bit may cost far less than one); Huffman coding, nearly every JPEG, has.
    const std::int64_t pixels = std::int64_t{cinfo_.image_width} * cinfo_.image_height;
    if (!cinfo_.arith_code && static_cast<std::uint64_t>(pixels) > kMaxJpegPixelsPerByte * total_bytes_)
      bad_image(what_, "JPEG of " + std::to_string(cinfo_.image_width) + "x" + std::to_string(cinfo_.image_height) +
                           " pixels in a file of " + std::to_string(total_bytes_) + " bytes, which cannot hold them (" +
                           "each 8x8 block takes at least one bit, so at most " +
                           std::to_string(kMaxJpegPixelsPerByte * total_bytes_) +
                           " pixels); the file is cut short or its header is false");
    return true;
  }

  [[noreturn]] void fail_decoding(JDIMENSION rows_done) {
    if (errors_.data_ended)
      bad_image(what_, "JPEG data cut short: the file ends after " + std::to_string(rows_done) + " of " +
                           std::to_string(cinfo_.output_height) + " rows (Pillow refuses a truncated image too)");
    bad_image(what_, std::string("corrupt JPEG data: ") + errors_.message);
  }

 private:
  std::string_view what_;
  std::size_t size_;
  std::uint64_t total_bytes_;
  JpegErrors errors_{};
  jpeg_decompress_struct cinfo_{};  // zeroed: jpeg_destroy_decompress is safe even if jpeg_create failed
};

// Pillow's MULDIV255: a * b / 255, rounded as its integer trick rounds.
int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// One row of libjpeg's output (gray or CMYK) -> RGB, as Pillow converts L and CMYK.
void gray_to_rgb(const JSAMPLE* in, std::uint8_t* out, JDIMENSION width) {
  for (JDIMENSION x = 0; x < width; ++x, out += 3) out[0] = out[1] = out[2] = in[x];
}

// Pillow reads 4-component JPEGs as rawmode CMYK;I (Adobe's inverted CMYK, assumed for every such file), then
// converts CMYK -> RGB with R = 255 - K' - (255 - K') * C' / 255 for the un-inverted C' = 255 - C, K' = 255 - K.
void cmyk_to_rgb(const JSAMPLE* in, std::uint8_t* out, JDIMENSION width) {
  for (JDIMENSION x = 0; x < width; ++x, in += 4, out += 3) {
    const int nk = 255 - (255 - in[3]);
    for (int c = 0; c < 3; ++c) out[c] = static_cast<std::uint8_t>(std::clamp(nk - muldiv255(255 - in[c], nk), 0, 255));
  }
}

}  // namespace

std::optional<ImageInfo> probe_jpeg(std::span<const std::uint8_t> bytes, std::string_view what, bool prefix,
                                    std::uint64_t total_bytes) {
  JpegReader reader(bytes, what, total_bytes);
  if (!reader.read_header(prefix)) return std::nullopt;
  const jpeg_decompress_struct& c = reader.cinfo();
  return ImageInfo{c.image_width, c.image_height, c.num_components};
}

RgbImage decode_jpeg(std::span<const std::uint8_t> bytes, std::string_view what) {
  JpegReader reader(bytes, what, bytes.size());
  reader.read_header(/*prefix=*/false);
  jpeg_decompress_struct& c = reader.cinfo();
  const int n = c.num_components;
  // Pillow's rawmode per layer count: L, RGB (libjpeg converts YCbCr), CMYK;I. jpeg_color_space stays libjpeg's
  // guess from the JFIF / Adobe markers, as Pillow leaves it.
  c.out_color_space = n == 1 ? JCS_GRAYSCALE : n == 3 ? JCS_RGB : JCS_CMYK;
  // libjpeg's defaults, which Pillow changes only in draft mode; spelled out because the pixels depend on them.
  c.dct_method = JDCT_ISLOW;
  c.do_fancy_upsampling = TRUE;
  if (!reader.guarded([&] { jpeg_start_decompress(&c); }) || reader.data_ended()) reader.fail_decoding(0);

  RgbImage out;
  out.width = c.output_width;
  out.height = c.output_height;
  const std::size_t stride = static_cast<std::size_t>(c.output_width) * 3;
  out.pixels.resize(stride * c.output_height);
  std::vector<JSAMPLE> row(n == 3 ? 0 : static_cast<std::size_t>(c.output_width) * static_cast<std::size_t>(n));
  while (c.output_scanline < c.output_height) {
    const JDIMENSION y = c.output_scanline;
    JSAMPROW target = n == 3 ? out.pixels.data() + stride * y : row.data();
    if (!reader.guarded([&] { jpeg_read_scanlines(&c, &target, 1); }) || reader.data_ended()) reader.fail_decoding(y);
    if (n == 1) gray_to_rgb(row.data(), out.pixels.data() + stride * y, c.output_width);
    if (n == 4) cmyk_to_rgb(row.data(), out.pixels.data() + stride * y, c.output_width);
  }
  // Reads on to EOI. The data may end here (every row is out: Pillow accepts that), but an error is an error.
  if (!reader.guarded([&] { jpeg_finish_decompress(&c); })) reader.fail_decoding(c.output_height);
  return out;
}

}  // namespace tessera::io::detail
