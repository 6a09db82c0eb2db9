#pragma once
// defines: what rank 0 prints while training: the step line and, on a terminal, a progress bar with ETA.
//   step 12/100 | loss 3.2101 | lr 1.00e-03 | 812 ms | 5.0k tok/s | MFU 41.3%   (MFU when known)
#include <cstdint>
#include <string>

namespace tessera {

struct StepResult {
  std::int64_t step = 0;    // 0-based optimizer step
  double loss = 0.0;        // mean over the step's micro-batches (and ranks)
  double lr = 0.0;
  std::int64_t tokens = 0;  // tokens processed by all ranks in this step
  double step_ms = 0.0;
  bool skipped = false;     // fp16: gradients overflowed and the update was not applied
  double loss_scale = 0.0;  // fp16 only; 0 otherwise
  double mfu = 0.0;         // model FLOPs utilization (report/mfu.hpp), a fraction; 0 when unknown
};

std::string format_step_line(const StepResult& r, std::int64_t total_steps);
// "5.0k" / "1.2M": tokens per second with a metric suffix.
std::string format_rate(double per_second);
// "[########------] 12/100  eta 1m02s"
std::string format_progress(std::int64_t done, std::int64_t total, double elapsed_s);

}  // namespace tessera
