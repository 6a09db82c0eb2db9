#pragma once
// A policy written outside tessera: checkpoint only the first K blocks.
#include <cstddef>
#include <string_view>

#include <tessera/core/axis.hpp>

template <std::size_t K>
struct CheckpointFirstBlocks {
  using axis = tessera::axis::checkpointing;
  static constexpr std::string_view name = "first blocks";
  static constexpr bool checkpointed(std::size_t block) { return block < K; }
};
