#pragma once
// defines: CheckpointPolicy, what the engine asks an activation-checkpointing policy.
//   checkpointed(block) -> bool   true: block `block` (0-based) keeps only its input in forward
//                                 and recomputes its activations during backward.
#include <concepts>
#include <cstddef>
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

template <class P>
concept CheckpointPolicy = PolicyOf<P, axis::checkpointing> && requires(std::size_t block) {
  { P::name } -> std::convertible_to<std::string_view>;
  { P::checkpointed(block) } -> std::same_as<bool>;
};

}  // namespace tessera
