#pragma once
// defines: tessera::HybridShard (FSDP HYBRID_SHARD): FullShard inside groups of G ranks, replicated across the
// W/G groups. G is the ranks per node by default, or shard_group_size=G (run config); G must divide the world
// size, checked at start. Gradients are reduce-scattered inside the group, then all-reduced across groups
// among the ranks holding the same shard (once per optimizer step). Gathers stay inside a node, which is the
// point: only gradient shards cross the slower inter-node links.
// Bytes per parameter (fp32 AdamW): (4 + 4 + 8)/G.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct HybridShard {
  using axis = axis::sharding;
  static constexpr std::string_view name = "hybrid_shard";
  static constexpr bool shards_parameters = true;
  static constexpr bool shards_gradients = true;
  static constexpr bool shards_optimizer = true;
  static constexpr bool data_parallel = true;
  static constexpr bool hybrid = true;
};

}  // namespace tessera
