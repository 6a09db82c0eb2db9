#pragma once
// defines: tessera::Fp32 ("32-true").
// Everything in fp32: the reference every other policy is compared with.
#include <c10/core/ScalarType.h>

#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct Fp32 {
  using axis = axis::precision;
  static constexpr std::string_view name = "32-true";
  static constexpr c10::ScalarType param_dtype = c10::ScalarType::Float;
  static constexpr c10::ScalarType compute_dtype = c10::ScalarType::Float;
  static constexpr c10::ScalarType optim_state_dtype = c10::ScalarType::Float;
  static constexpr bool loss_scaling = false;
};

}  // namespace tessera
