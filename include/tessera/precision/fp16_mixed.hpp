#pragma once
// defines: tessera::Fp16Mixed ("16-mixed").
// fp32 master parameters and state; compute in fp16 with a dynamic loss scaler (see engine/loss_scaler.hpp).
#include <c10/core/ScalarType.h>

#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct Fp16Mixed {
  using axis = axis::precision;
  static constexpr std::string_view name = "16-mixed";
  static constexpr c10::ScalarType param_dtype = c10::ScalarType::Float;
  static constexpr c10::ScalarType compute_dtype = c10::ScalarType::Half;
  static constexpr c10::ScalarType optim_state_dtype = c10::ScalarType::Float;
  static constexpr bool loss_scaling = true;
};

}  // namespace tessera
