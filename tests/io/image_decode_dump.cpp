// tessera's side of tests/reference/check_images.py: for each image path in LIST (one a line) writes PATH.tessera,
// "ok WIDTH HEIGHT CHANNELS\n" and the decoded RGB bytes (height * width * 3), or "error MESSAGE\n". The bytes come
// from io::decode_image on the file's contents; io::read_image and io::probe_image on the file must agree with it
// (same pixels, same size, same error), else the tool fails.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/io/image_file.hpp"

namespace {

struct Outcome {
  std::optional<tessera::io::RgbImage> image;
  std::int64_t channels = 0;
  std::string error;  // FormatError's message, when image is empty
};

template <class F>
Outcome attempt(F&& f) {
  Outcome o;
  try {
    f(o);
  } catch (const tessera::FormatError& e) {
    o.image.reset();
    o.error = e.what();
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: image_decode_dump LIST (a file of image paths, one a line)\n";
    return 2;
  }
  std::ifstream list(argv[1]);
  int disagreements = 0;
  for (std::string path; std::getline(list, path);) {
    if (path.empty()) continue;
    std::ifstream in(path, std::ios::binary);
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Outcome from_bytes = attempt([&](Outcome& o) {
      o.channels = tessera::io::probe_image(bytes, path).channels;
      o.image = tessera::io::decode_image(bytes, path);
    });
    const Outcome from_file = attempt([&](Outcome& o) {
      const tessera::io::ImageInfo info = tessera::io::probe_image(path);
      o.channels = info.channels;
      o.image = tessera::io::read_image(path);
      if (o.image->width != info.width || o.image->height != info.height)
        throw tessera::FormatError("probe_image says " + std::to_string(info.width) + "x" +
                                   std::to_string(info.height));
    });
    const bool agree = from_bytes.image.has_value() == from_file.image.has_value() &&
                       (from_bytes.image ? from_bytes.image->pixels == from_file.image->pixels &&
                                               from_bytes.channels == from_file.channels
                                         : from_bytes.error == from_file.error);
    if (!agree) {
      std::cerr << path << ": decode_image and read_image / probe_image disagree: '" << from_bytes.error << "' vs '"
                << from_file.error << "'\n";
      ++disagreements;
    }
    std::ofstream out(path + ".tessera", std::ios::binary | std::ios::trunc);
    if (const auto& image = from_bytes.image) {
      out << "ok " << image->width << " " << image->height << " " << from_bytes.channels << "\n";
      out.write(reinterpret_cast<const char*>(image->pixels.data()),
                static_cast<std::streamsize>(image->pixels.size()));
    } else {
      out << "error " << from_bytes.error << "\n";
    }
  }
  return disagreements ? 1 : 0;
}
