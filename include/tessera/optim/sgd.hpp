#pragma once
// defines: tessera::Sgd, plain stochastic gradient descent as torch.optim.SGD with its defaults
// (no momentum, no weight decay unless weight_decay= is given): p <- p - lr * (g + wd*p).
// It keeps no state: optimizer bytes are 0 in every phase.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>

#include <vector>

#include "tessera/core/axis.hpp"
#include "tessera/optim/concept.hpp"

namespace tessera {

struct Sgd {
  using axis = axis::optimizer;
  static constexpr std::string_view name = "sgd";
  static constexpr double default_weight_decay = 0.0;

  struct State {};
  static State init(const at::Tensor&, c10::ScalarType) { return {}; }
  static void step(State& state, at::Tensor& flat_param, const at::Tensor& flat_grad, const StepHyper& hyper);
  static std::int64_t state_bytes(const State&) { return 0; }
  static std::vector<StateTensor> state_tensors(State&) { return {}; }
};

}  // namespace tessera
