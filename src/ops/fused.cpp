// implements: rms_norm and gated (ops/fused.hpp): autograd functions that keep their inputs only.
#include "tessera/ops/fused.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "tessera/core/error.hpp"

namespace tessera::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool is_16bit(c10::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// 1 / rms(x) per row, in fp32, as both forms compute it.
at::Tensor inverse_rms(const at::Tensor& x, double eps) {
  return at::rsqrt(x.to(at::kFloat).pow(2).mean(-1, /*keepdim=*/true) + eps);
}

// The normalized x before the weight, in the dtype the form gives it.
at::Tensor normalized(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& rstd, RmsForm form) {
  if (form == RmsForm::llama) return (x.to(at::kFloat) * rstd).to(x.scalar_type());
  const at::Tensor n = x * rstd;  // promoted to fp32
  return is_16bit(weight.scalar_type()) ? n.to(weight.scalar_type()) : n;
}

struct RmsNorm : torch::autograd::Function<RmsNorm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps,
                            int64_t form, bool fused) {
    at::Tensor normed, rstd;
    if (fused) {
      std::tie(normed, rstd) = at::_fused_rms_norm(x, {x.size(-1)}, std::nullopt, eps);
    } else {
      rstd = inverse_rms(x, eps);
      normed = normalized(x, weight, rstd, static_cast<RmsForm>(form));
    }
    ctx->save_for_backward({x, weight, rstd});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["form"] = form;
    ctx->saved_data["fused"] = fused;
    return weight * normed;
  }

  // As autograd differentiates the forward's ops: out = weight * n gives dweight = sum_to(g * n) and
  // dn = g * weight; then n's own chain (the fused kernel's backward, or the fp32 ops' derivatives: n = h * r with
  // r = rsqrt(m + eps), m = mean(p), p = h^2, h = x in fp32).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &rstd = saved[2];
    const double eps = ctx->saved_data["eps"].toDouble();
    const auto form = static_cast<RmsForm>(ctx->saved_data["form"].toInt());
    const bool fused = ctx->saved_data["fused"].toBool();
    const at::Tensor& g = grads[0];
    const auto x_dtype = x.scalar_type();
    at::Tensor dx, dweight;
    if (fused) {
      if (ctx->needs_input_grad(1))
        dweight = at::sum_to(g * std::get<0>(at::_fused_rms_norm(x, {x.size(-1)}, std::nullopt, eps)), weight.sizes());
      if (ctx->needs_input_grad(0)) {
        const at::Tensor dn = g * weight;
        // A dry run's meta tensors (predict/): the kernel has no meta implementation; its result is one tensor
        // like x, which is all the prediction needs.
        dx = x.is_meta() ? at::empty_like(x)
                         : std::get<0>(at::_fused_rms_norm_backward(dn, x, {x.size(-1)}, rstd, std::nullopt,
                                                                    {true, false}));
      }
      return {dx, dweight, at::Tensor(), at::Tensor(), at::Tensor()};
    }
    if (ctx->needs_input_grad(1)) dweight = at::sum_to(g * normalized(x, weight, rstd, form), weight.sizes());
    if (ctx->needs_input_grad(0)) {
      const at::Tensor h = x.to(at::kFloat);
      const at::Tensor dn = (g * weight).to(at::kFloat);                          // through the cast, if any
      const at::Tensor dr = at::sum_to(dn * h, rstd.sizes());                     // n = h * r
      const at::Tensor dm = -0.5 * dr * rstd.pow(3);                              // r = rsqrt(m + eps)
      const at::Tensor dp = dm.expand_as(h) / static_cast<double>(h.size(-1));    // m = mean(p, -1)
      const at::Tensor direct = dn * rstd, through_square = dp * (2 * h);         // p = h^2
      // llama: both paths meet in fp32 (h = x.to(fp32)), then one cast; t5: x enters each path itself, so each
      // gradient is cast to x's dtype and the two are added there.
      dx = form == RmsForm::llama ? (direct + through_square).to(x_dtype)
                                  : direct.to(x_dtype) + through_square.to(x_dtype);
    }
    return {dx, dweight, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor activate(const at::Tensor& gate, GateAct act) {
  return act == GateAct::silu ? at::silu(gate) : at::gelu(gate, "tanh");
}

struct Gated : torch::autograd::Function<Gated> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up, int64_t act) {
    ctx->save_for_backward({gate, up});
    ctx->saved_data["act"] = act;
    return activate(gate, static_cast<GateAct>(act)) * up;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &gate = saved[0], &up = saved[1];
    const auto act = static_cast<GateAct>(ctx->saved_data["act"].toInt());
    const at::Tensor& g = grads[0];
    at::Tensor dgate, dup;
    if (ctx->needs_input_grad(0)) {
      const at::Tensor d = g * up;
      dgate = act == GateAct::silu ? at::silu_backward(d, gate) : at::gelu_backward(d, gate, "tanh");
    }
    if (ctx->needs_input_grad(1)) dup = g * activate(gate, act);
    return {dgate, dup, at::Tensor()};
  }
};

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, RmsForm form, bool fused) {
  if (fused && form != RmsForm::llama) throw Error("ops::rms_norm: the fused kernels compute the llama form only");
  return RmsNorm::apply(x, weight, eps, static_cast<int64_t>(form), fused);
}

at::Tensor gated(const at::Tensor& gate, const at::Tensor& up, GateAct act) {
  return Gated::apply(gate, up, static_cast<int64_t>(act));
}

}  // namespace tessera::ops
