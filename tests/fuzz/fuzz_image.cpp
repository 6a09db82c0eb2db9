// Fuzz target: image decoding (io/image_file.hpp, on libjpeg-turbo and libpng): probe_image and decode_image on the
// bytes, as the Arrow and Parquet readers hand them over, and probe_image on them as a file.
#include "fuzz_support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/image_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    (void)tessera::io::probe_image(tessera::fuzz::write_file(tessera::fuzz::work_dir() / "image", data, size));
  } catch (const tessera::Error&) {
  }
  try {
    const tessera::io::ImageInfo info = tessera::io::probe_image(bytes, "fuzz input");
    // An arithmetic-coded JPEG's header may claim up to Pillow's 178,956,970 pixels over a few bytes of data (a
    // Huffman-coded one at most 512 pixels a byte: image_jpeg.cpp), and decoding allocates what Pillow allocates for
    // it (the RGB image, a progressive JPEG's coefficients: over -malloc_limit_mb), then decodes gray. So JPEGs over
    // 4 megapixels are probed only, as libjpeg-turbo's own fuzzers cap them. A PNG's allocations are bounded by its
    // data (deflate inflates at most 1032 times; image_png.cpp checks before allocating).
    const bool jpeg = size > 0 && data[0] == 0xff;
    if (jpeg && info.width * info.height > 4'000'000) return 0;
    const tessera::io::RgbImage image = tessera::io::decode_image(bytes, "fuzz input");
    static volatile std::size_t sink;
    sink = image.pixels.size();
  } catch (const tessera::Error&) {
  }
  return 0;
}
