#pragma once
// defines: rms_norm and gated, two pieces of the decoder and encoder layers whose op-by-op form saves more for
// backward than the gradient needs. Each is one autograd node that computes what the op-by-op form computes and
// keeps only its inputs, recomputing the rest in backward:
//   rms_norm  HF LlamaRMSNorm / T5LayerNorm: keeps x and the fp32 1/rms per row, not the normalized copy nor the
//             fp32 copy of x that the op-by-op form saves for x^2;
//   gated     LlamaMLP's silu(gate) * up, T5's gated-gelu gelu_new(wi_0 h) * wi_1 h: keeps gate and up, not the
//             activation's output.
// Per Llama layer that is about two hidden states and one MLP intermediate less at the end of forward, per T5 layer
// three hidden states per norm (two of them fp32) and one intermediate (docs/memory.md).
#include <ATen/core/Tensor.h>

#include <cstdint>

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

}  // namespace tessera::ops
