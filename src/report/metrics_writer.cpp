#include "tessera/report/metrics_writer.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/partial_files.hpp"

namespace tessera {

MetricsWriter::MetricsWriter(std::filesystem::path path) : path_(std::move(path)) {
  partial_ = path_;
  partial_ += ".partial";
  out_.open(partial_, std::ios::out | std::ios::trunc);
  if (!out_) throw Error("metrics=" + path_.string() + ": cannot create " + partial_.string());
  register_partial_file(partial_);  // removed should the process be killed (a job ended by another rank)
}

MetricsWriter::~MetricsWriter() {
  if (enabled() && !committed_) {
    out_.close();
    std::error_code ignored;
    std::filesystem::remove(partial_, ignored);
    unregister_partial_file(partial_);
  }
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!enabled()) return;
  out_ << record.dump() << '\n';
}

void MetricsWriter::commit() {
  if (!enabled() || committed_) return;
  out_.close();
  if (!out_) throw Error("metrics=" + path_.string() + ": writing failed (disk full?)");
  std::filesystem::rename(partial_, path_);
  unregister_partial_file(partial_);
  committed_ = true;
}

}  // namespace tessera
