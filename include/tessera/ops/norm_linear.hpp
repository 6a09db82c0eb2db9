#pragma once
// defines: rms_norm_linear and gated_linear, the RMSNorm families' (Llama, T5) analogs of ops/fused.hpp's
// layer_norm_linear and gelu_linear: one autograd node each that computes what the op-by-op form computes and keeps
// its inputs only, recomputing the rest in backward:
//   rms_norm_linear  ops::rms_norm (either form, LibTorch's fused kernels or not) and the linear layers that read its
//                    output (Llama's q, k, v and gate, up; T5's q, k, v, the cross-attention's q and wi_0, wi_1):
//                    keeps x and the fp32 1/rms per row, not the normalized copy each linear layer keeps for its
//                    weight gradient;
//   gated_linear     down(act(gate) * up), the gated MLPs' last product (LlamaMLP's down_proj, T5's wo): keeps gate
//                    and up, not their product, which the down projection keeps for its weight gradient.
// Per Llama layer that is two hidden states and one MLP intermediate less at the end of forward; per T5 layer one
// hidden state per norm and one intermediate (docs/memory.md). Only the families' sources use them, so the header
// that every experiment includes (models/family_parts.hpp, through ops/fused.hpp) does not carry them.
#include <ATen/core/Tensor.h>

#include <vector>

#include "tessera/ops/fused.hpp"
#include "tessera/ops/gemm.hpp"

namespace tessera::ops {

// h = rms_norm(x, norm_weight, eps, form, fused), then y_i = h W_i^T for each weight (the RMSNorm families' layers
// have no biases), the products through `gemm`. Backward recomputes h when a weight needs its gradient.
std::vector<at::Tensor> rms_norm_linear(const Gemm& gemm, const at::Tensor& x, const at::Tensor& norm_weight,
                                        double eps, RmsForm form, bool fused, at::TensorList weights);

// gated(gate, up, act) W^T, the product through `gemm` (no bias). Backward recomputes the gated product when the
// weight needs its gradient.
at::Tensor gated_linear(const Gemm& gemm, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& weight,
                        GateAct act);

}  // namespace tessera::ops
