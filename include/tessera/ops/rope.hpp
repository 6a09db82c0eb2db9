#pragma once
// defines: ops::rope, the rotary position embedding of transformers' apply_rotary_pos_emb:
//   x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2])
// x (B, heads, T, D), any strides with the last dimension dense; cos, sin (T, D).
// Where x's computation runs on CUDA (kernel_target, engine/target.hpp; a dry run for CUDA too), in fp32, fp16 or
// bf16 with cos and sin of x's dtype: one autograd node over tessera's kernel (ops/rope_cuda.hpp), one pass forward
// and one backward (the op-by-op form launches seven kernels forward, three of them on broadcast or strided operands,
// and more backward), the arithmetic in fp32 rounded once, the output's memory in (B, T, heads, D) order as the
// family's q and k views (what the op-by-op form gives them). It saves cos and sin only, as the op-by-op form does. Elsewhere the op-by-op form, each op rounded in x's dtype as transformers computes it.
#include <ATen/core/Tensor.h>

namespace tessera::ops {

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace tessera::ops
