#pragma once
// defines: tessera::Bf16Mixed ("bf16-mixed").
// fp32 master parameters, gradients and optimizer state; forward and backward run on bf16 copies of the parameters.
#include <c10/core/ScalarType.h>

#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct Bf16Mixed {
  using axis = axis::precision;
  static constexpr std::string_view name = "bf16-mixed";
  static constexpr c10::ScalarType param_dtype = c10::ScalarType::Float;
  static constexpr c10::ScalarType compute_dtype = c10::ScalarType::BFloat16;
  static constexpr c10::ScalarType optim_state_dtype = c10::ScalarType::Float;
  static constexpr bool loss_scaling = false;
};

}  // namespace tessera
