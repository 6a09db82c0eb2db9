#include "tessera/models/ops.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace tessera::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Reduced-precision GEMMs on the CPU run as fp32 GEMMs on the exactly widened inputs, rounded once at the
// end: what a GPU's bf16/fp16 tensor cores compute (fp32 accumulation), at fp32 speed on CPUs that lack
// bf16/fp16 units (LibTorch's own CPU bf16 GEMM is an order of magnitude slower there).
bool emulate_gemm(const at::Tensor& t) {
  return t.is_cpu() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}

// a @ b with fp32 arithmetic. Only the reduced-precision inputs are saved for backward, so activation
// memory is what a native bf16/fp16 kernel would keep, not that of fp32 copies.
struct WidenedMatmul : torch::autograd::Function<WidenedMatmul> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    return at::matmul(a.to(at::kFloat), b.to(at::kFloat)).to(a.scalar_type());
  }
  // a (..., m, k), b (..., k, n) with broadcast batch dims; grads reduced back to each input's shape.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor a = saved[0].to(at::kFloat), b = saved[1].to(at::kFloat), g = grads[0].to(at::kFloat);
    at::Tensor ga = at::matmul(g, b.transpose(-1, -2));
    at::Tensor gb = at::matmul(a.transpose(-1, -2), g);
    if (ga.sizes() != a.sizes()) ga = ga.sum_to_size(a.sizes());
    if (gb.sizes() != b.sizes()) gb = gb.sum_to_size(b.sizes());
    return {ga.to(saved[0].scalar_type()), gb.to(saved[1].scalar_type())};
  }
};

// x @ w^T for x (..., in) and w (out, in), saving the reduced-precision x and w.
struct WidenedLinear : torch::autograd::Function<WidenedLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->save_for_backward({x, w});
    return at::linear(x.to(at::kFloat), w.to(at::kFloat)).to(x.scalar_type());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor x = saved[0].to(at::kFloat), w = saved[1].to(at::kFloat), g = grads[0].to(at::kFloat);
    const at::Tensor gx = at::matmul(g, w);                                                   // (..., in)
    const at::Tensor gw = at::mm(g.reshape({-1, g.size(-1)}).t(), x.reshape({-1, x.size(-1)}));  // (out, in)
    return {gx.to(saved[0].scalar_type()), gw.to(saved[1].scalar_type())};
  }
};

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight) {
  if (emulate_gemm(x)) return WidenedLinear::apply(x, weight);
  return at::linear(x, weight);
}

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  if (emulate_gemm(a)) return WidenedMatmul::apply(a, b);
  return at::matmul(a, b);
}

at::Tensor silu(const at::Tensor& x) {
  if (x.is_cpu() && x.scalar_type() == at::kHalf) return at::silu(x.to(at::kFloat)).to(at::kHalf);
  return at::silu(x);
}

}  // namespace tessera::ops
