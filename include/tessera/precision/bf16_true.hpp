#pragma once
// defines: tessera::Bf16True ("bf16-true").
// Parameters, gradients and optimizer state stored in bf16 (2 bytes each); no fp32 copy anywhere.
#include <c10/core/ScalarType.h>

#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct Bf16True {
  using axis = axis::precision;
  static constexpr std::string_view name = "bf16-true";
  static constexpr c10::ScalarType param_dtype = c10::ScalarType::BFloat16;
  static constexpr c10::ScalarType compute_dtype = c10::ScalarType::BFloat16;
  static constexpr c10::ScalarType optim_state_dtype = c10::ScalarType::BFloat16;
  static constexpr bool loss_scaling = false;
};

}  // namespace tessera
