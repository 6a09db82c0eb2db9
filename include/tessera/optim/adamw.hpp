#pragma once
// defines: tessera::AdamW, decoupled weight decay Adam with torch.optim.AdamW's defaults and update:
//   p  <- p * (1 - lr*wd)
//   m  <- b1*m + (1-b1)*g ;  v <- b2*v + (1-b2)*g^2
//   p  <- p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// b1, b2 come with each step (StepHyper: torch's 0.9, 0.999 unless the run config's beta1/beta2 say otherwise).
// State: two tensors the size of the parameters (8 bytes per fp32 parameter).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>
#include <string_view>

#include "tessera/core/axis.hpp"
#include "tessera/optim/concept.hpp"

namespace tessera {

struct AdamW {
  using axis = axis::optimizer;
  static constexpr std::string_view name = "adamw";
  static constexpr double eps = 1e-8;
  static constexpr double default_weight_decay = 0.01;

  struct State {
    at::Tensor exp_avg;     // (n,) first moment
    at::Tensor exp_avg_sq;  // (n,) second moment
    std::int64_t steps = 0;
  };
  static State init(const at::Tensor& flat_param, c10::ScalarType state_dtype);
  static void step(State& state, at::Tensor& flat_param, const at::Tensor& flat_grad, const StepHyper& hyper);
  static std::int64_t state_bytes(const State& state);
  static std::vector<StateTensor> state_tensors(State& state) {
    return {{"exp_avg", state.exp_avg, true}, {"exp_avg_sq", state.exp_avg_sq, true}};
  }
  // OffloadOptimizer: the same update on fp32 CPU tensors in one fused pass (optim/cpu_adamw.hpp), also writing
  // the result cast to param_out's dtype when param_out is given. Returns true (param_out filled).
  static bool cpu_step(State& state, at::Tensor& master, const at::Tensor& grad, const StepHyper& hyper,
                       at::Tensor* param_out);
};

}  // namespace tessera
