#pragma once
// defines: tessera::NoShard: one process holds everything (the single-process reference).
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct NoShard {
  using axis = axis::sharding;
  static constexpr std::string_view name = "none";
  static constexpr bool shards_parameters = false;
  static constexpr bool shards_gradients = false;
  static constexpr bool shards_optimizer = false;
};

}  // namespace tessera
