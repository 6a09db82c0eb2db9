// Writes the JPEGs tests/reference/check_images.py cannot make with Pillow's encoder (Pillow decodes them all):
// YCCK, arithmetic coding, sampling factors Pillow never writes (4:4:0, 4:1:1, subsampled CMYK), restart intervals.
//   jpeg_write RAW OUT WIDTH HEIGHT SPACE SAMPLING QUALITY [arith] [progressive] [restart=ROWS]
// RAW: height * width * components bytes, RGB for SPACE ycc / rgb, gray for gray, CMYK (as Pillow stores it, not
// inverted) for cmyk / ycck. SAMPLING: h,v of each component, "2x2,1x1,1x1". libjpeg writes the Adobe marker for
// rgb, cmyk and ycck, inverted as Photoshop does, which is what Pillow assumes when it reads.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <jpeglib.h>

int main(int argc, char** argv) {
  if (argc < 8) {
    std::cerr << "usage: jpeg_write RAW OUT WIDTH HEIGHT ycc|rgb|gray|cmyk|ycck HxV[,HxV...] QUALITY [arith] "
                 "[progressive] [restart=ROWS]\n";
    return 2;
  }
  const std::string space = argv[5], sampling = argv[6];
  const int width = std::atoi(argv[3]), height = std::atoi(argv[4]), quality = std::atoi(argv[7]);
  const int components = space == "gray" ? 1 : space == "cmyk" || space == "ycck" ? 4 : 3;
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<unsigned char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.size() != static_cast<std::size_t>(width) * height * components) {
    std::cerr << "jpeg_write: " << argv[1] << " holds " << raw.size() << " bytes, not " << width << "x" << height
              << "x" << components << "\n";
    return 2;
  }
  // libjpeg's CMYK input is Adobe's inverted form; Pillow's CMYK is not.
  if (components == 4)
    for (unsigned char& b : raw) b = static_cast<unsigned char>(255 - b);

  std::FILE* out = std::fopen(argv[2], "wb");
  if (!out) {
    std::perror(argv[2]);
    return 1;
  }
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr errors{};
  cinfo.err = jpeg_std_error(&errors);  // its error_exit prints the message and exits: fine for a test tool
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, out);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, space == "gray"   ? JCS_GRAYSCALE
                              : space == "rgb"  ? JCS_RGB
                              : space == "cmyk" ? JCS_CMYK
                              : space == "ycck" ? JCS_YCCK
                                                : JCS_YCbCr);
  jpeg_set_quality(&cinfo, quality, TRUE);
  std::size_t at = 0;
  for (int c = 0; c < cinfo.num_components && at < sampling.size(); ++c) {
    int h = 1, v = 1, used = 0;
    std::sscanf(sampling.c_str() + at, "%dx%d%n", &h, &v, &used);
    cinfo.comp_info[c].h_samp_factor = h;
    cinfo.comp_info[c].v_samp_factor = v;
    at += static_cast<std::size_t>(used) + 1;
  }
  for (int i = 8; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "arith") cinfo.arith_code = TRUE;
    if (option == "progressive") jpeg_simple_progression(&cinfo);
    if (option.rfind("restart=", 0) == 0) cinfo.restart_in_rows = std::atoi(option.c_str() + 8);
  }
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = raw.data() + static_cast<std::size_t>(cinfo.next_scanline) * width * components;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return std::fclose(out) == 0 ? 0 : 1;
}
