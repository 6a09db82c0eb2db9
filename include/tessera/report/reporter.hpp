#pragma once
// defines: Reporter, where a run's events go: rank 0's console (step lines, memory tables, progress bar)
// and the JSONL metrics file.
//   {"event":"run","family":"llama","model":"tiny","sharding":"full_shard","precision":...,"world_size":W,...}
//   {"event":"prediction","peak":b,"phases":[...],...}     (predict=true: the dry run's figures)
//   {"event":"step","step":N,"loss":L,"lr":x,"tokens":n,"step_ms":t}
//   {"event":"memory","step":N,"micro":m,"phase":"after_bwd","rank":k,"params":b,...,"reserved":b}
//   {"event":"done","train_s":s,"peak":b, ...}
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

#include "tessera/memory/snapshot.hpp"
#include "tessera/report/console.hpp"
#include "tessera/report/metrics_writer.hpp"

namespace tessera {

struct ReportOptions {
  bool print = true;            // false: nothing on stdout (tests)
  std::int64_t log_every = 1;   // step lines every N steps (the last step is always printed)
  bool print_config = true;     // the config and experiment tables at the start of run()
  // A progress bar when stdout is a terminal. Off in jobs of several ranks: mpirun gives its ranks a pseudo-terminal
  // even when its own output goes to a file, which would fill logs with the bar's escape codes.
  bool progress = true;
};

class Reporter {
 public:
  Reporter(MetricsWriter metrics, ReportOptions options);

  void print(std::string_view text);
  bool prints_config() const { return options_.print_config; }
  // The run's first record: `experiment` (Trainer::run_record()) under "event":"run".
  void start(nlohmann::json experiment);
  void step(const StepResult& result, std::int64_t total_steps);
  // Any other record, as is (the prediction's: predict/dry_run.hpp).
  void record(const nlohmann::json& record) { metrics_.write(record); }
  // print_line: also print the snapshot's table line (the JSONL file gets every snapshot).
  void memory(const memory::MemorySnapshot& snapshot, bool print_line);
  // Every rank's snapshot of one point (rank 0 of a job): one record per rank in the file, and one line
  // of per-figure maxima over the ranks, followed (each_rank) by every rank's own line.
  void memory_of_ranks(std::span<const memory::MemorySnapshot> ranks, bool print_line, bool each_rank = false);
  // Writes the done record (train_s and peak plus `extra`); commit() then gives the metrics file its name.
  void done(double train_s, std::int64_t peak_bytes, nlohmann::json extra);
  void commit() { metrics_.commit(); }

 private:
  void clear_progress();
  MetricsWriter metrics_;
  ReportOptions options_;
  bool terminal_ = false;
  bool progress_shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace tessera
