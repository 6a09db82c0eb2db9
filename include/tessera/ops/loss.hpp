#pragma once
// defines: linear_cross_entropy, a language model's head and its loss as one node: the mean cross-entropy of the
// logits x W^T over the rows whose target is not ignored, what the families' heads compute
//   at::cross_entropy_loss(gemm.linear(x, W).to(fp32).view({-1, V}), targets.reshape({-1}), {}, Mean, ignore_index)
// (Hugging Face's ForCausalLMLoss and T5's loss: logits in the compute dtype, upcast, mean over the kept rows).
//
// Whole (gemm.loss_block_bytes = 0): exactly that op-by-op form. Its graph keeps the fp32 log-probabilities
// (rows x V x 4 bytes) for backward, and the backward holds two more such tensors at once (the gradients of the
// log-probabilities and of the logits): 3 x rows x V x 4 bytes at the top of backward, 0.74 GiB for BLIP-2 OPT at
// batch 16, 0.73 GiB for a 7B Llama at 4 x 512 tokens.
//
// Blocked (gemm.loss_block_bytes > 0): the vocabulary in blocks whose fp32 logits (and fp32 weight rows) take at
// most that many bytes each, but no more than 8 blocks (each block launches four products of the head and about
// twenty elementwise kernels: at a GPU batch of 16 x 2048 tokens, 32 MiB blocks would be 125 of them); the forward
// keeps a running log-sum-exp per row and the target's logit, and saves x, W and the fp32 log-sum-exp only; the
// backward recomputes each block's logits (one more product of the head: 2 x rows x H x V FLOPs) and turns them
// into that block's gradient (softmax - one-hot) / kept rows, rounded to x's dtype as the op-by-op form's cast does, which
// gives W's gradient rows for the block in full and a partial product for x's gradient, summed in fp32 and rounded
// once. The same numbers as the whole form up to summation order (the log-sum-exp is accumulated block by block);
// a few blocks of fp32 logits live at once instead of three full copies.
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "tessera/ops/gemm.hpp"

namespace tessera::ops {

// x (..., H), weight (V, H) in x's dtype, targets (...) int64 with x's leading shape, each in [0, V) or
// ignore_index -> the mean loss, a 0-dim fp32 tensor (NaN when every target is ignored, as at::cross_entropy_loss).
// A target outside [0, V) that is not ignore_index is refused (Error naming it), as the op-by-op form refuses it.
at::Tensor linear_cross_entropy(const Gemm& gemm, const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& targets, std::int64_t ignore_index = -100);

}  // namespace tessera::ops
