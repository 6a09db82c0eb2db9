#pragma once
// defines: Gemm, how a model family's matrix products run (linear layers, attention, batched matmuls, the patch
// convolution), and widened_bytes(), the transient memory of its widened path.
//
// native: LibTorch's kernels, as they are.
// widen:  for bf16/fp16 operands (what a native 16-bit GEMM does, on a CPU without 16-bit instructions, see
//         ops/cpu_lowp.hpp): each product widens its 16-bit operands to fp32, multiplies in fp32 and rounds the
//         result to the 16-bit dtype once; the backward does the same for each gradient product. The inputs are
//         exact in fp32 and the sums accumulate in fp32, as a native 16-bit GEMM's do, so results agree with the
//         native path up to summation order. The autograd graph saves the 16-bit tensors (the fp32 copies live only
//         inside one product), and a linear layer widens its weight in blocks of rows so that a copy is bounded
//         (about 32 MiB per block plus one fp32 copy of the layer's input and output rows).
// fp32 (and fp64) tensors go to LibTorch's kernels whichever the path.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace tessera::ops {

enum class Lowp : std::uint8_t { native, widen };

// The blocked loss's default block (ops/loss.hpp): 32 MiB of fp32 logits.
inline constexpr std::int64_t kLossBlockBytes = std::int64_t{32} << 20;

struct Gemm {
  Lowp lowp = Lowp::native;
  // The language-model heads' product and loss (ops/loss.hpp): in blocks of the vocabulary whose fp32 logits take
  // at most this many bytes (but no more than 8 blocks), or 0: the whole (rows, V) logits at once.
  std::int64_t loss_block_bytes = 0;

  // True when a product of tensors of t's dtype is widened.
  bool widens(const at::Tensor& t) const;

  // x (..., in) W^T [+ b]: W (out, in), b (out) or undefined -> (..., out); at::linear.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = at::Tensor()) const;
  // a (..., n, k) @ b (..., k, m) -> (..., n, m), the batch dimensions equal; at::matmul.
  at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) const;
  // Scaled dot-product attention without dropout, at::scaled_dot_product_attention: q (B, H, L, E), k (B, Hk, S, E),
  // v (B, Hk, S, Ev) -> (B, H, L, Ev); mask boolean (true = attend) or additive, broadcastable to (B, H, L, S);
  // scale default 1/sqrt(E); gqa: Hk divides H and each key/value head serves H/Hk query heads.
  at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const std::optional<at::Tensor>& mask = std::nullopt, bool causal = false,
                       std::optional<double> scale = std::nullopt, bool gqa = false) const;
  // A 2-D convolution without padding (a patch embedding: stride = kernel); at::conv2d.
  at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    std::int64_t stride) const;
};

// The widened path's fp32 copies, in bytes, over the process: live now, and the most live at once since the last
// take_widened_peak() (which returns that figure and starts the next interval at the live bytes).
std::int64_t widened_live_bytes();
std::int64_t take_widened_peak();

}  // namespace tessera::ops
