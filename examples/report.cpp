// tessera-report: several runs' metrics files (metrics=FILE) into one self-contained HTML page: memory by phase as
// stacked bars (per rank for jobs of several) with each run's peak, time, throughput and MFU, the loss curves, and
// the seeds' experiment table (report/html_report.hpp).
//   tessera-report [-o report.html] [--title TEXT] RUN.jsonl [RUN.jsonl ...]
// The page is written to a new "<out>.partial-<pid>" and renamed into place, so a failed report leaves no file. Exit
// codes: 0 written, 1 a bad or missing metrics file or an unwritable output, 2 bad arguments (among them an -o that
// is one of the inputs, a directory, a device, a FIFO or a socket).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/new_file.hpp"
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

void remove_partial(const tessera::PartialFile& partial) {
  if (partial.path.empty()) return;
  std::error_code ignored;
  std::filesystem::remove(partial.path, ignored);
  tessera::unregister_partial_file(partial.path);
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
  // The page replaces -o by a rename: refused up front when that would replace one of the inputs (the same file by
  // device and inode, however spelled or linked) or turn a directory, device, FIFO or socket into a plain file.
  if (const std::string problem = tessera::replace_problem(out); !problem.empty())
    return bad_arguments("-o " + out.string() + ": " + problem + "; give the path of the page to write, e.g. -o "
                         "report.html");
  if (struct stat out_status {}; ::stat(out.c_str(), &out_status) == 0)
    for (const auto& f : files)
      if (struct stat in_status {}; ::stat(f.c_str(), &in_status) == 0 && in_status.st_dev == out_status.st_dev &&
                                    in_status.st_ino == out_status.st_ino)
        return bad_arguments("-o " + out.string() + ": is the metrics file " + f.string() + " given to read; the "
                             "page would replace it. Give the page another path, e.g. -o report.html");
  tessera::PartialFile partial;
  try {
    std::vector<tessera::report::RunMetrics> runs;
    for (const auto& f : files) runs.push_back(tessera::report::read_metrics(f));
    const std::string page = tessera::report::html_report(runs, title);
    try {
      partial = tessera::create_partial_file(out);  // a name of its own, never opened through a file or link
    } catch (const tessera::Error& e) {
      throw tessera::Error("-o " + out.string() + ": cannot be written: " + e.what() + " (check the directory "
                           "exists and is writable)");
    }
    const bool written = tessera::write_all(partial.fd, page);
    const int write_errno = errno;
    const bool closed = ::close(partial.fd) == 0;
    if (!written || !closed)
      throw tessera::Error("-o " + out.string() + ": writing failed (" + std::strerror(written ? errno : write_errno) +
                           "; disk full?); nothing was written");
    std::error_code ec;
    std::filesystem::rename(partial.path, out, ec);
    if (ec) throw tessera::Error("-o " + out.string() + ": cannot be renamed into place (" + ec.message() + ")");
    tessera::unregister_partial_file(partial.path);
    std::printf("[report] %zu run(s) -> %s\n", runs.size(), out.string().c_str());
    return 0;
  } catch (const std::bad_alloc&) {
    remove_partial(partial);
    std::fprintf(stderr, "error: out of memory reading %zu metrics file(s) or drawing their page; report fewer runs "
                 "at a time\n", files.size());
    return 1;
  } catch (const std::exception& e) {
    remove_partial(partial);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
