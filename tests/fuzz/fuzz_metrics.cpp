// Fuzz target: a run's metrics file (report/html_report.hpp read_metrics), what tessera-report reads from the
// metrics=FILE of other runs, then the page it writes from it.
#include "fuzz_support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/report/html_report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path file =
      tessera::fuzz::write_file(tessera::fuzz::work_dir() / "metrics.jsonl", data, size);
  try {
    const tessera::report::RunMetrics runs[] = {tessera::report::read_metrics(file)};
    (void)tessera::report::html_report(runs, "fuzz");
  } catch (const tessera::Error&) {
  }
  return 0;
}
