#pragma once
// defines: checkpointed_call, activation checkpointing for one block.
// Forward runs `fn` without recording a graph and saves only the block input x (B, T, H); backward runs
// `fn` again with a graph and back-propagates through it. Gradients are those of calling fn directly:
// the block's ops are deterministic and the recomputation sees the same parameters.
#include <ATen/core/Tensor.h>

#include <functional>

namespace tessera {

using BlockFn = std::function<at::Tensor(const at::Tensor& x, at::TensorList params)>;

// `fn` must stay alive until backward has run (the engine owns one per block for the whole run).
at::Tensor checkpointed_call(const BlockFn& fn, const at::Tensor& x, at::TensorList params);

}  // namespace tessera
