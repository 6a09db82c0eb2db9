#pragma once
// defines: ShardingPolicy, what the engine asks a sharding policy.
//   name                  label printed in the config table
//   shards_parameters     parameters live as 1/world shards between uses
//   shards_gradients      gradients are reduce-scattered to their owner rank
//   shards_optimizer      each rank keeps optimizer state for its shard only
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
};

}  // namespace tessera
