#include "tessera/report/metrics_writer.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/core/new_file.hpp"
#include "tessera/core/partial_files.hpp"

namespace tessera {

MetricsWriter::MetricsWriter(std::filesystem::path path) : path_(std::move(path)) {
  struct stat status {};
  if (::stat(path_.c_str(), &status) == 0 && !S_ISREG(status.st_mode))
    fail(S_ISDIR(status.st_mode) ? "is a directory; give the path of a file, e.g. metrics=run.jsonl"
                                 : "exists and is not a regular file (a device, FIFO or socket); give the path of a "
                                   "file to create or replace");
  PartialFile partial;
  try {
    partial = create_partial_file(path_);  // a name of its own, never opened through an existing file or link
  } catch (const Error& e) {
    fail(e.what());
  }
  partial_ = partial.path;
  if (!open_stream(out_, partial)) {
    const std::string why = std::strerror(errno);
    std::error_code ignored;
    std::filesystem::remove(partial_, ignored);
    unregister_partial_file(partial_);
    fail("cannot open " + partial_.string() + ": " + why);
  }
}

MetricsWriter::~MetricsWriter() {
  if (enabled() && !committed_) {
    out_.close();
    std::error_code ignored;
    std::filesystem::remove(partial_, ignored);
    unregister_partial_file(partial_);
  }
}

void MetricsWriter::fail(const std::string& what) const { throw Error("metrics=" + path_.string() + ": " + what); }

void MetricsWriter::write(const nlohmann::json& record) {
  if (!enabled()) return;
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_)
    fail("cannot write line " + std::to_string(records_ + 1) + " to " + partial_.string() + ": " + std::strerror(errno) +
         "; free space on that file system or choose another path");
  ++records_;
}

void MetricsWriter::commit() {
  if (!enabled() || committed_) return;
  out_.close();
  if (!out_) fail("cannot finish " + partial_.string() + ": " + std::strerror(errno) + " (disk full?)");
  std::error_code ec;
  std::filesystem::rename(partial_, path_, ec);
  if (ec) fail("cannot rename " + partial_.string() + " into place: " + ec.message());
  unregister_partial_file(partial_);
  committed_ = true;
}

}  // namespace tessera
