#pragma once
// Helpers shared by the test files: small run configs and tensor comparisons.
#include <ATen/ATen.h>

#include <string>

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

}  // namespace tessera::testing
