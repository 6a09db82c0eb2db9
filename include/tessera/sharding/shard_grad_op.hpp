#pragma once
// defines: tessera::ShardGradOp, ZeRO stage 2 (FSDP SHARD_GRAD_OP): optimizer state and gradients sharded.
// A unit's full gradients exist only during its backward: right after it they are reduce-scattered, each rank
// keeping (and accumulating over micro-steps) the 1/W slice it updates; updated slices are all-gathered.
// Bytes per parameter (fp32 AdamW, W ranks): 4 params + 4/W grads + 8/W optimizer state.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct ShardGradOp {
  using axis = axis::sharding;
  static constexpr std::string_view name = "shard_grad_op";
  static constexpr bool shards_parameters = false;
  static constexpr bool shards_gradients = true;
  static constexpr bool shards_optimizer = true;
  static constexpr bool data_parallel = true;
  static constexpr bool hybrid = false;
};

}  // namespace tessera
