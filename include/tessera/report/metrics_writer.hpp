#pragma once
// defines: MetricsWriter, the JSONL metrics file (one JSON object a line).
// Lines go to "<path>.partial" and the file takes its real name only at commit(): a run that fails
// leaves no metrics file behind (the partial file is removed).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tessera {

class MetricsWriter {
 public:
  MetricsWriter() = default;                           // disabled: write() does nothing
  explicit MetricsWriter(std::filesystem::path path);  // Error if the file cannot be created
  MetricsWriter(MetricsWriter&&) = default;
  MetricsWriter& operator=(MetricsWriter&&) = default;
  ~MetricsWriter();

  bool enabled() const { return !path_.empty(); }
  void write(const nlohmann::json& record);
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path partial_;
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace tessera
