// tessera-report: several runs' metrics files (metrics=FILE) into one self-contained HTML page: memory by phase as
// stacked bars (per rank for jobs of several) with each run's peak, time, throughput and MFU, the loss curves, and
// the seeds' experiment table (report/html_report.hpp).
//   tessera-report [-o report.html] [--title TEXT] RUN.jsonl [RUN.jsonl ...]
// The page is written under "<out>.partial" and renamed into place, so a failed report leaves no file. Exit codes:
// 0 written, 1 a bad or missing metrics file or an unwritable output, 2 bad arguments.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/report/html_report.hpp"

namespace {

constexpr const char* usage =
    "usage: tessera-report [-o OUT.html] [--title TEXT] RUN.jsonl [RUN.jsonl ...]\n"
    "  RUN.jsonl   a metrics file a run wrote (metrics=FILE); one bar group, loss line and table row each, in order\n"
    "  -o OUT      the page to write (default report.html)\n"
    "  --title T   the page's title (default \"tessera runs\")\n";

int bad_arguments(const std::string& why) {
  std::fprintf(stderr, "error: %s\n%s", why.c_str(), usage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path out = "report.html";
  std::string title = "tessera runs";
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (a == "-o" || a == "--out" || a == "--title") {
      if (i + 1 >= argc) return bad_arguments(std::string(a) + " needs a value");
      if (a == "--title") title = argv[++i];
      else out = argv[++i];
      continue;
    }
    if (a.starts_with("-")) return bad_arguments("unknown option " + std::string(a));
    files.emplace_back(a);
  }
  if (files.empty()) return bad_arguments("no metrics files given");
  const std::filesystem::path partial = out.string() + ".partial";
  try {
    std::vector<tessera::report::RunMetrics> runs;
    for (const auto& f : files) runs.push_back(tessera::report::read_metrics(f));
    const std::string page = tessera::report::html_report(runs, title);
    tessera::register_partial_file(partial);
    {
      std::ofstream o(partial, std::ios::binary | std::ios::trunc);
      if (!o) throw tessera::Error("-o " + out.string() + ": cannot be written (check the directory exists and is "
                                   "writable)");
      o << page;
      o.flush();
      if (!o) throw tessera::Error("-o " + out.string() + ": writing failed (disk full?); nothing was written");
    }
    std::error_code ec;
    std::filesystem::rename(partial, out, ec);
    if (ec) throw tessera::Error("-o " + out.string() + ": cannot be renamed into place (" + ec.message() + ")");
    tessera::unregister_partial_file(partial);
    std::printf("[report] %zu run(s) -> %s\n", runs.size(), out.string().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(partial, ec);
    tessera::unregister_partial_file(partial);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
