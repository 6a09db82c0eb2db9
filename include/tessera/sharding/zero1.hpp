#pragma once
// defines: tessera::Zero1, ZeRO stage 1: optimizer state sharded over the ranks. Gradients are reduced in
// buckets as in Ddp; each rank then updates only its 1/W slice of every unit's (padded) flat parameters with
// its 1/W of the optimizer state, and the updated slices are all-gathered so every rank again holds all
// parameters. Bytes per parameter (fp32 AdamW, W ranks): 4 params + 4 grads + 8/W optimizer state.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct Zero1 {
  using axis = axis::sharding;
  static constexpr std::string_view name = "zero1";
  static constexpr bool shards_parameters = false;
  static constexpr bool shards_gradients = false;
  static constexpr bool shards_optimizer = true;
  static constexpr bool data_parallel = true;
  static constexpr bool hybrid = false;
};

}  // namespace tessera
