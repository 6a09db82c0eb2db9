#pragma once
// defines: ShardingPolicy, what the engine asks a sharding policy; sharding_stage<P>, the ZeRO stage it is.
//   name                  label printed in the config table
//   shards_optimizer      each rank keeps optimizer state for its shard only            (ZeRO-1)
//   shards_gradients      gradients are reduce-scattered to their owner rank             (ZeRO-2)
//   shards_parameters     parameters live as 1/group shards between uses                 (ZeRO-3)
//   data_parallel         the policy runs on several ranks (false: NoShard, a world of one)
//   hybrid                shards inside groups (a node, or shard_group_size ranks) and replicates across
//                         them; false shards over the whole world
// Each level includes the ones above it: shards_parameters implies shards_gradients implies shards_optimizer.
#include <concepts>
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

template <class P>
concept ShardingPolicy = PolicyOf<P, axis::sharding> && requires {
  { P::name } -> std::convertible_to<std::string_view>;
  { P::shards_parameters } -> std::convertible_to<bool>;
  { P::shards_gradients } -> std::convertible_to<bool>;
  { P::shards_optimizer } -> std::convertible_to<bool>;
  { P::data_parallel } -> std::convertible_to<bool>;
  { P::hybrid } -> std::convertible_to<bool>;
};

// 0 replicate everything, 1 + optimizer state, 2 + gradients, 3 + parameters.
template <ShardingPolicy P>
inline constexpr int sharding_stage = P::shards_parameters ? 3 : P::shards_gradients ? 2 : P::shards_optimizer ? 1 : 0;

// The stages nest; a policy that shards parameters but not gradients (say) has no meaning in the engine.
template <ShardingPolicy P>
inline constexpr bool sharding_levels_nest = (!P::shards_parameters || P::shards_gradients) &&
                                             (!P::shards_gradients || P::shards_optimizer) &&
                                             (!P::hybrid || P::shards_parameters) &&
                                             (P::data_parallel || !P::shards_optimizer);

}  // namespace tessera
