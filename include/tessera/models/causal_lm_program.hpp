#pragma once
// defines: causal_lm_forward, the program of a decoder-only language model whose calls are 0 = embedding,
// 1..L = the blocks, L+1 = the loss head on (hidden, targets): Llama's and OPT's forward.
#include <cstddef>

#include "tessera/models/family_parts.hpp"

namespace tessera::models {

inline at::Tensor causal_lm_forward(CallRunner& run, std::size_t blocks, const TokenBatch& batch) {
  at::Tensor x = run.call(0, {batch.inputs});
  for (std::size_t b = 1; b <= blocks; ++b) x = run.call(b, {x});
  return run.call(blocks + 1, {x, batch.targets});
}

}  // namespace tessera::models
