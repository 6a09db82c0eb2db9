#pragma once
// defines: RunMetrics (one metrics file read back), read_metrics, and html_report, the self-contained page that
// tessera-report writes from several runs' metrics files (no script, no external file: inline SVG and CSS):
//   memory   one group of stacked bars per run (per rank in a job of several), a bar per phase (before forward,
//            after forward, after backward, after the optimizer step) stacked params | grads | optimizer state |
//            activations (acts: the residual, memory/snapshot.hpp), at the step the seeds print (step 1, or the
//            last one recorded); the run's measured peak marked over its group (solid) and the peak it predicted
//            for itself (dashed: predict=true, predict/dry_run.hpp); time per step, tokens/s and MFU under it
//   loss     every run's loss per step, one line each
//   table    the seeds' experiment table: the policies, ranks and batch shape, then the memory figures (the
//            highest over phases and ranks), the peak measured and predicted, time per step, tokens/s and MFU
// Figures in the page are the file's own; nothing is recomputed but means and maxima.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::report {

inline constexpr std::string_view phase_labels[] = {"before_fwd", "after_fwd", "after_bwd", "after_opt"};

// What a metrics file may claim; read_metrics refuses a record past these (FormatError naming the file, the line and
// the field), so that no count read drives a loop or an allocation (once: world_size 10^12 looped without end, rank
// 10^9 allocated until std::bad_alloc). Each is far beyond any run tessera makes.
inline constexpr std::int64_t kMaxReportRanks = 4096;             // world_size, and ranks below it: bars on the page
inline constexpr std::int64_t kMaxReportStep = 1'000'000'000'000;  // step and micro-step indices
inline constexpr std::int64_t kMaxReportBytes = 1LL << 53;        // 8 PiB: any memory figure (exact in a double)
inline constexpr double kMaxReportLoss = 3.4028234663852886e38;   // FLT_MAX: a loss past float's range is no run's
inline constexpr std::size_t kMaxRecordBytes = 1 << 20;           // one line of the file

struct MemoryRecord {
  std::int64_t step = 0, micro = 0, rank = 0;
  std::string phase;  // one of phase_labels
  std::int64_t params = 0, grads = 0, optim = 0, acts = 0;
  std::int64_t params_cpu = 0, grads_cpu = 0, optim_cpu = 0;  // host memory under offload
  std::int64_t allocated = 0, peak = 0, reserved = 0;
};

struct StepRecord {
  std::int64_t step = 0;
  double loss = 0, step_ms = 0, mfu = 0;  // mfu 0: not recorded
  std::int64_t tokens = 0;
  bool skipped = false;
};

struct RunMetrics {
  std::string label;      // the file name without .jsonl
  nlohmann::json run;     // the "run" record (an empty object for files written before it existed)
  std::vector<MemoryRecord> memory;
  std::vector<StepRecord> steps;
  nlohmann::json done;    // the "done" record

  std::int64_t world_size() const;
  // The step whose memory the report shows: 1 when recorded (the optimizer state exists then), else the last.
  std::int64_t memory_step() const;
  // The bar of (rank, phase) at memory_step(): the micro-step of that phase with the most allocated.
  const MemoryRecord* bar(std::int64_t rank, std::string_view phase) const;
  // The mean of step_ms and of mfu over the steps after the first (the first pays for warm-up), or the only one.
  double mean_step_ms() const;
  double mean_mfu() const;
};

// Reads a metrics file (report/reporter.hpp's records). FormatError "FILE:LINE: reason; fix" for a line that is not
// a JSON object, a record missing a field, holding one of the wrong type or past the bounds above, or a file with no
// done record (a run still going, or not a tessera metrics file); Error when the file cannot be read (missing, or a
// directory, FIFO or device: refused without blocking).
RunMetrics read_metrics(const std::filesystem::path& path);

// The page, for one or more runs. Error for none.
std::string html_report(std::span<const RunMetrics> runs, std::string_view title);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(std::string_view text);

}  // namespace tessera::report
