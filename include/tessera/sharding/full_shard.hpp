#pragma once
// defines: tessera::FullShard, ZeRO stage 3 (FSDP FULL_SHARD): parameters, gradients and optimizer state all
// sharded. Each unit (the embedding, every decoder block, the head) keeps a flat, padded 1/W shard. A wrapped
// unit (wrap_blocks, as Lightning's auto_wrap_policy; default: every block) has its full parameters, in the compute
// dtype, all-gathered just before its forward and freed right after it (the next unit's gather is started first:
// prefetch), gathered again before its backward and freed after it, when its gradients are reduce-scattered. The
// units not wrapped are the root, gathered from its first call to the end of backward.
// Bytes per parameter (fp32 AdamW, W ranks): (4 + 4 + 8)/W, plus the root and up to two gathered blocks at a time.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct FullShard {
  using axis = axis::sharding;
  static constexpr std::string_view name = "full_shard";
  static constexpr bool shards_parameters = true;
  static constexpr bool shards_gradients = true;
  static constexpr bool shards_optimizer = true;
  static constexpr bool data_parallel = true;
  static constexpr bool hybrid = false;
};

}  // namespace tessera
