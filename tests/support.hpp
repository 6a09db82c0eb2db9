#pragma once
// Helpers shared by the test files: small run configs and tensor comparisons.
#include <ATen/ATen.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "scratch_dir.hpp"
#include "tessera/tessera.hpp"

namespace tessera::testing {

// The tiny preset on synthetic tokens, sized to run a step in well under a second on one core.
inline RunConfig small_run(std::int64_t batch_size = 4, std::int64_t accumulate = 1, std::int64_t seq_len = 32) {
  RunConfig cfg;
  cfg.model = "tiny";
  cfg.batch_size = batch_size;
  cfg.accumulate_grad_batches = accumulate;
  cfg.seq_len = seq_len;
  cfg.max_steps = 3;
  cfg.threads = 1;
  cfg.device = "cpu";
  return cfg;
}

inline ReportOptions quiet() { return ReportOptions{false, 1}; }

// The loss of the first step of the tiny Llama under `Precision` (AdamW, no checkpointing).
template <class Precision>
double first_loss() {
  Trainer<Experiment<models::Llama, Precision>> t(small_run(), quiet());
  return t.train_step(0).loss;
}

// The losses of steps 0..n-1 of the tiny Llama under `Precision` (AdamW, no checkpointing, lr 1e-3), every step on
// the same 4 rows (num_train_samples = batch_size), so that the loss falls fast (~2.5 in 6 steps): the last loss
// follows n-1 updates.
template <class Precision>
std::vector<double> losses(std::int64_t n) {
  RunConfig cfg = small_run();
  cfg.max_steps = n;
  cfg.num_train_samples = cfg.batch_size;
  Trainer<Experiment<models::Llama, Precision>> t(cfg, quiet());
  std::vector<double> out;
  for (std::int64_t s = 0; s < n; ++s) out.push_back(t.train_step(s).loss);
  return out;
}

// How a reduced precision trains against fp32 over the same n steps: the gap of the last loss (nonzero proves
// the reduced-precision arithmetic ran: fp32 itself gives exactly fp32's loss) and the two loss drops.
struct PrecisionRun {
  double last_gap, drop, fp32_drop;
};
template <class Precision>
PrecisionRun against_fp32(std::int64_t n) {
  const std::vector<double> low = losses<Precision>(n), fp32 = losses<Fp32>(n);
  return {std::abs(low.back() - fp32.back()), low.front() - low.back(), fp32.front() - fp32.back()};
}

// The tiny Llama under `Precision` for n steps with cpu_lowp=native and with cpu_lowp=widen (the same weights and
// batches as losses<Precision>), and how much fp32 widening each run did (the largest widened_peak of its memory
// snapshots: 0 when no product was widened).
struct LowpPaths {
  std::vector<double> native, widened;
  std::int64_t native_widened_bytes = 0, widen_widened_bytes = 0;
};
template <class Precision>
LowpPaths lowp_paths(std::int64_t n) {
  LowpPaths out;
  for (const CpuLowp path : {CpuLowp::native, CpuLowp::widen}) {
    RunConfig cfg = small_run();
    cfg.max_steps = n;
    cfg.num_train_samples = cfg.batch_size;
    cfg.cpu_lowp = path;
    Trainer<Experiment<models::Llama, Precision>> t(cfg, quiet());
    std::vector<double>& losses = path == CpuLowp::native ? out.native : out.widened;
    for (std::int64_t s = 0; s < n; ++s) losses.push_back(t.train_step(s).loss);
    std::int64_t& bytes = path == CpuLowp::native ? out.native_widened_bytes : out.widen_widened_bytes;
    for (const memory::MemorySnapshot& snap : t.snapshots()) bytes = std::max(bytes, snap.widened_peak);
  }
  return out;
}

// max_k |a_k - b_k| / |b_k|
inline double max_rel_gap(const std::vector<double>& a, const std::vector<double>& b) {
  double gap = 0.0;
  for (std::size_t k = 0; k < a.size() && k < b.size(); ++k) gap = std::max(gap, std::abs(a[k] - b[k]) / std::abs(b[k]));
  return gap;
}

// max |a - b| / max(max |b|, tiny): one number for "equal within tolerance" on whole buffers.
inline double max_rel_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor da = a.detach().to(at::kDouble), db = b.detach().to(at::kDouble);
  const double scale = std::max(db.abs().max().item<double>(), 1e-12);
  return (da - db).abs().max().item<double>() / scale;
}

// ||a - b|| / ||b|| (Frobenius): the relative error of a whole buffer. Element-wise maxima are the wrong
// measure after Adam, whose update m / (sqrt(v) + eps) ~ lr * sign(g) amplifies rounding noise in
// gradients that are themselves at noise level.
inline double rel_norm_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor da = a.detach().to(at::kDouble), db = b.detach().to(at::kDouble);
  return (da - db).norm().item<double>() / std::max(db.norm().item<double>(), 1e-300);
}

// Runs `child` in a forked process and returns its wait status; the child never returns into Catch.
template <class Child>
int status_of_child(Child&& child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    child();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace tessera::testing
