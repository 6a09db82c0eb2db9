#pragma once
// defines: MetricsWriter, the JSONL metrics file (one JSON object a line).
// Lines go to a new "<path>.partial-<pid>" (core/new_file.hpp) and the file takes its real name only at commit():
// a run that fails leaves no metrics file behind (the partial file is removed, also when the process is killed).
// Every line is flushed as it is written, so a full disk or a file size limit stops the run at that
// step with an Error naming the setting, not at the end.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tessera {

class MetricsWriter {
 public:
  MetricsWriter() = default;  // disabled: write() does nothing
  // Error when `path` is a directory or another non-regular file (a device, FIFO or socket), or when the
  // partial file cannot be created.
  explicit MetricsWriter(std::filesystem::path path);
  MetricsWriter(MetricsWriter&&) = default;
  MetricsWriter& operator=(MetricsWriter&&) = default;
  ~MetricsWriter();

  bool enabled() const { return !path_.empty(); }
  void write(const nlohmann::json& record);  // Error when the line cannot be written
  void commit();                             // closes and renames; Error when either fails

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::filesystem::path path_;
  std::filesystem::path partial_;
  std::ofstream out_;
  std::int64_t records_ = 0;
  bool committed_ = false;
};

}  // namespace tessera
