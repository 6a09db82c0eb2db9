#pragma once
// defines: tessera::CheckpointEveryNth<N>, tessera::CheckpointEveryBlock.
// Blocks 0, N, 2N, ... are checkpointed: they keep only their input (batch x seq x hidden) in forward
// and run forward again inside backward. N = 1 checkpoints every block (the seeds' act_ckpt=True);
// larger N trades memory back for speed.
#include <cstddef>
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

template <std::size_t N>
struct CheckpointEveryNth {
  static_assert(N >= 1, "CheckpointEveryNth<N>: N must be at least 1 (N = 1 checkpoints every block).");
  using axis = axis::checkpointing;
  static constexpr std::size_t every = N;
  static constexpr std::string_view name = N == 1 ? "every block" : "every Nth block (blocks 0, N, 2N, ...)";
  static constexpr bool checkpointed(std::size_t block) { return block % N == 0; }
};

using CheckpointEveryBlock = CheckpointEveryNth<1>;

}  // namespace tessera
