// table_read: how fast tessera reads a table (data/table_source.hpp) and how much memory it holds while doing so.
//   table_read DATA [IMAGE_COLUMN [TEXT_COLUMN]]      (defaults image, text; split train)
// Reads every row's image bytes and text, first in the table's order, then in Dataset.shuffle(seed=0)'s order (the
// labs' shuffled access), and prints per pass the rows, the bytes, the seconds, rows/s and MB/s; then the process's
// peak resident set (VmHWM) and, at the end, its resident anonymous and file-backed memory (RssAnon, RssFile: a
// memory-mapped Arrow file's pages are file-backed, the kernel's to drop). Last line: `peak_rss_mib: N`.
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "tessera/data/lab_order.hpp"
#include "tessera/data/table_source.hpp"

namespace {

std::string status_line(const char* key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return line;
  return std::string(key) + " ?";
}

}  // namespace

int main(int argc, char** argv) {
  using tessera::data::ColumnKind;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DATA [IMAGE_COLUMN [TEXT_COLUMN]]\n", argv[0]);
    return 2;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const tessera::data::TableSource table(argv[1], "train");
    const double open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: opened in %.2f s\n", table.description().c_str(), open_s);
    const std::size_t image = table.column(argc > 2 ? argv[2] : "image", ColumnKind::image, "image_column");
    const std::size_t text = table.column(argc > 3 ? argv[3] : "text", ColumnKind::text, "text_column");
    const auto order = tessera::data::numpy_permutation(0, table.rows());
    for (const bool shuffled : {false, true}) {
      const auto start = std::chrono::steady_clock::now();
      std::int64_t bytes = 0;
      for (std::int64_t r = 0; r < table.rows(); ++r) {
        const std::int64_t row = shuffled ? order[static_cast<std::size_t>(r)] : r;
        bytes += static_cast<std::int64_t>(table.image_bytes(row, image).size() + table.text(row, text).size());
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%-9s %lld rows, %.1f MB in %.2f s: %.0f rows/s, %.1f MB/s\n", shuffled ? "shuffled" : "in order",
                  static_cast<long long>(table.rows()), static_cast<double>(bytes) / 1e6, s,
                  static_cast<double>(table.rows()) / s, static_cast<double>(bytes) / 1e6 / s);
    }
    std::printf("%s\n%s\n%s\n", status_line("VmHWM").c_str(), status_line("RssAnon").c_str(),
                status_line("RssFile").c_str());
    long long hwm_kb = 0;
    std::sscanf(status_line("VmHWM").c_str(), "VmHWM: %lld", &hwm_kb);
    std::printf("peak_rss_mib: %lld\n", hwm_kb / 1024);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "table_read: %s\n", e.what());
    return 1;
  }
  return 0;
}
