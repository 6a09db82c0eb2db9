#pragma once
// defines: tessera::NoAdapter, the default: every parameter of the model trains.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct NoAdapter {
  using axis = axis::adapter;
  static constexpr std::string_view name = "none (full fine-tuning)";
  static constexpr bool trains_adapters = false;
  static constexpr bool quantizes_base = false;
  static constexpr bool double_quant = false;
};

}  // namespace tessera
