#pragma once
// defines: tessera::NoCheckpoint: every block keeps its activations for backward (fastest, most memory).
#include <cstddef>
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct NoCheckpoint {
  using axis = axis::checkpointing;
  static constexpr std::string_view name = "none";
  static constexpr bool checkpointed(std::size_t) { return false; }
};

}  // namespace tessera
