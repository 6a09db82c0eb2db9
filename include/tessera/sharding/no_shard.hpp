#pragma once
// defines: tessera::NoShard: one process holds everything (the single-process reference). A job of more than
// one rank is refused at start: use Ddp to replicate.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct NoShard {
  using axis = axis::sharding;
  static constexpr std::string_view name = "none";
  static constexpr bool shards_parameters = false;
  static constexpr bool shards_gradients = false;
  static constexpr bool shards_optimizer = false;
  static constexpr bool data_parallel = false;
  static constexpr bool hybrid = false;
};

}  // namespace tessera
