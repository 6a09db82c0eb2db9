#pragma once
// defines: rms_norm, gated, layer_norm_linear and gelu_linear, pieces of the families' layers whose op-by-op form
// saves more for backward than the gradient needs. Each is one autograd node that computes what the op-by-op form
// computes and keeps only its inputs, recomputing the rest in backward:
//   rms_norm           HF LlamaRMSNorm / T5LayerNorm: keeps x and the fp32 1/rms per row, not the normalized copy nor
//                      the fp32 copy of x that the op-by-op form saves for x^2;
//   gated              LlamaMLP's silu(gate) * up, T5's gated-gelu gelu_new(wi_0 h) * wi_1 h: keeps gate and up, not
//                      the activation's output;
//   layer_norm_linear  a LayerNorm and the linear layers that read its output (ViT's q, k, v and fc1, OPT's too):
//                      keeps x and the fp32 row statistics, not the normalized copy each linear layer keeps for its
//                      weight gradient;
//   gelu_linear        fc2(gelu(h)) of the GELU MLPs (ViT, BLIP-2's vision model and Q-Former): keeps h, not gelu(h).
// Per Llama layer that is about two hidden states and one MLP intermediate less at the end of forward, per T5 layer
// three hidden states per norm (two of them fp32) and one intermediate, per ViT and BLIP-2 vision layer two hidden
// states and one MLP intermediate, per pre-LN OPT layer two hidden states (docs/memory.md).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "tessera/ops/gemm.hpp"

namespace tessera::ops {

// llama: weight * (x.to(fp32) * rsqrt(mean(x^2) + eps)).to(x.dtype)      (LlamaRMSNorm)
// t5:    weight * (x * rsqrt(mean(x.to(fp32)^2) + eps)), cast to the weight's dtype when that is 16-bit (T5LayerNorm)
enum class RmsForm : std::uint8_t { llama, t5 };

// fused (llama form only): LibTorch's fused kernels (_fused_rms_norm and its backward, what the CUDA path runs);
// else the op-by-op fp32 form, whose gradient is reproduced term by term.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, RmsForm form, bool fused = false);

// act(gate) * up, elementwise (same shapes): silu (SwiGLU) or gelu with the tanh approximation (gelu_new).
enum class GateAct : std::uint8_t { silu, gelu_tanh };
at::Tensor gated(const at::Tensor& gate, const at::Tensor& up, GateAct act);

// h = layer_norm(x, norm_weight, norm_bias, eps) over the last dimension (at::layer_norm), then y_i = h W_i^T + b_i
// for each weight (biases: one per weight, or none), the products through `gemm`. Every tensor must be defined.
// Backward recomputes h when a weight needs its gradient.
std::vector<at::Tensor> layer_norm_linear(const Gemm& gemm, const at::Tensor& x, const at::Tensor& norm_weight,
                                          const at::Tensor& norm_bias, double eps, at::TensorList weights,
                                          at::TensorList biases = {});

// gelu(x) W^T + b, the exact (erf) GELU, the product through `gemm`; bias may be undefined. Backward recomputes
// gelu(x) when the weight needs its gradient.
at::Tensor gelu_linear(const Gemm& gemm, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace tessera::ops
