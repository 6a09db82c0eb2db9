#pragma once
// defines: tessera::NoOffload, the default: parameters, gradients and optimizer state stay on the device.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct NoOffload {
  using axis = axis::offload;
  static constexpr std::string_view name = "none";
  static constexpr bool offloads_optimizer = false;
  static constexpr bool offloads_parameters = false;
};

}  // namespace tessera
