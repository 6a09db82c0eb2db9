#pragma once
// defines: stack_forward, the program of a family that is one stack: call 0 = the embedding of `inputs`, calls
// 1..L = the blocks, call L+1 = the loss head on (hidden, targets). Llama's and OPT's forward (tokens, next
// tokens) and ViT's (pixels, class ids).
#include <ATen/core/Tensor.h>

#include <cstddef>

#include "tessera/models/family_parts.hpp"

namespace tessera::models {

inline at::Tensor stack_forward(CallRunner& run, std::size_t blocks, const at::Tensor& inputs,
                                const at::Tensor& targets) {
  at::Tensor x = run.call(0, {inputs});
  for (std::size_t b = 1; b <= blocks; ++b) x = run.call(b, {x});
  return run.call(blocks + 1, {x, targets});
}

}  // namespace tessera::models
