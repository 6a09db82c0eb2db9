// implements: rms_norm, gated, layer_norm_linear and gelu_linear (ops/fused.hpp): autograd functions that keep their
// inputs only.
#include "tessera/ops/fused.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <tuple>

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

// (..., n) -> (rows, n), a view where x allows one.
at::Tensor rows(const at::Tensor& x) { return x.reshape({-1, x.size(-1)}); }

// What autograd gives a linear layer y = a W^T + b for the gradient g of y: dW = g^T a, db = g summed over the rows
// (each when asked), and g W, the gradient of a (returned; undefined when not asked). `a` is computed only when
// the weight needs its gradient. Products through gemm.
at::Tensor linear_backward(const Gemm& gemm, AutogradContext* ctx, const at::Tensor& g, const at::Tensor& weight,
                           bool has_bias, std::size_t weight_edge, std::size_t bias_edge, bool need_input,
                           const std::function<at::Tensor()>& input_rows, at::Tensor& dweight, at::Tensor& dbias) {
  const at::Tensor g2 = rows(g);
  if (ctx->needs_input_grad(weight_edge)) dweight = gemm.matmul(g2.t(), input_rows());
  if (has_bias && ctx->needs_input_grad(bias_edge)) dbias = g2.sum(0);
  return need_input ? gemm.matmul(g2, weight) : at::Tensor();
}

// Edges (the tensor inputs in order): x, norm weight, norm bias, the n weights, then the biases.
struct LayerNormLinear : torch::autograd::Function<LayerNormLinear> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& norm_weight,
                               const at::Tensor& norm_bias, at::TensorList weights, at::TensorList biases, double eps,
                               int64_t lowp) {
    const Gemm gemm{static_cast<Lowp>(lowp)};
    auto [h, mean, rstd] = at::native_layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps);
    variable_list out, saved{x, norm_weight, norm_bias, mean, rstd};
    for (std::size_t i = 0; i < weights.size(); ++i) {
      out.push_back(gemm.linear(h, weights[i], biases.empty() ? at::Tensor() : biases[i]));
      saved.push_back(weights[i]);
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["lowp"] = lowp;
    ctx->saved_data["biases"] = static_cast<int64_t>(biases.size());
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &norm_weight = saved[1], &norm_bias = saved[2], &mean = saved[3],
                     &rstd = saved[4];
    const std::size_t n = saved.size() - 5, n_biases = static_cast<std::size_t>(ctx->saved_data["biases"].toInt());
    const Gemm gemm{static_cast<Lowp>(ctx->saved_data["lowp"].toInt())};
    const double eps = ctx->saved_data["eps"].toDouble();
    const std::array<bool, 3> need_norm{ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    const bool need_h_grad = need_norm[0] || need_norm[1] || need_norm[2];
    at::Tensor h;  // recomputed once, the first time a weight needs it
    const auto h_rows = [&] {
      if (!h.defined()) h = rows(std::get<0>(at::native_layer_norm(x, {x.size(-1)}, norm_weight, norm_bias, eps)));
      return h;
    };
    variable_list out(3 + n + n_biases + 2);
    at::Tensor dh;
    for (std::size_t i = 0; i < n; ++i) {
      at::Tensor dbias;
      const at::Tensor d = linear_backward(gemm, ctx, grads[i], saved[5 + i], n_biases > 0, 3 + i, 3 + n + i,
                                           need_h_grad, h_rows, out[3 + i], dbias);
      if (n_biases > 0) out[3 + n + i] = dbias;
      if (d.defined()) dh = dh.defined() ? dh + d : d;
    }
    if (need_h_grad) {
      auto [dx, dnw, dnb] = at::native_layer_norm_backward(dh.view(x.sizes()), x, {x.size(-1)}, mean, rstd,
                                                           norm_weight, norm_bias, need_norm);
      out[0] = dx;
      out[1] = dnw;
      out[2] = dnb;
    }
    return out;
  }
};

// Edges: x, weight, then the bias when there is one (an absent input has no edge).
struct GeluLinear : torch::autograd::Function<GeluLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, int64_t lowp) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["lowp"] = lowp;
    ctx->saved_data["bias"] = bias.has_value();
    return Gemm{static_cast<Lowp>(lowp)}.linear(at::gelu(x), weight, bias.value_or(at::Tensor()));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1];
    const Gemm gemm{static_cast<Lowp>(ctx->saved_data["lowp"].toInt())};
    variable_list out(4);
    const at::Tensor da = linear_backward(gemm, ctx, grads[0], weight, ctx->saved_data["bias"].toBool(), 1, 2,
                                          ctx->needs_input_grad(0), [&] { return rows(at::gelu(x)); }, out[1], out[2]);
    if (da.defined()) out[0] = at::gelu_backward(da.view(x.sizes()), x);
    return out;
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

std::vector<at::Tensor> layer_norm_linear(const Gemm& gemm, const at::Tensor& x, const at::Tensor& norm_weight,
                                          const at::Tensor& norm_bias, double eps, at::TensorList weights,
                                          at::TensorList biases) {
  if (weights.empty()) throw Error("ops::layer_norm_linear: no linear layer to feed");
  if (!biases.empty() && biases.size() != weights.size())
    throw Error("ops::layer_norm_linear: " + std::to_string(biases.size()) + " biases for " +
                std::to_string(weights.size()) + " weights; give one per weight or none");
  // Autograd takes no undefined tensor as an input.
  const auto undefined = [](const at::Tensor& t) { return !t.defined(); };
  if (!norm_weight.defined() || !norm_bias.defined() || std::any_of(weights.begin(), weights.end(), undefined) ||
      std::any_of(biases.begin(), biases.end(), undefined))
    throw Error("ops::layer_norm_linear: an undefined norm weight, norm bias, weight or bias; every tensor it takes "
                "must be defined (a layer without a bias: give no biases and add the others' after)");
  return LayerNormLinear::apply(x, norm_weight, norm_bias, weights, biases, eps, static_cast<int64_t>(gemm.lowp));
}

at::Tensor gelu_linear(const Gemm& gemm, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  // Autograd takes no undefined tensor as an input: an absent bias is no input at all.
  return GeluLinear::apply(x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
                           static_cast<int64_t>(gemm.lowp));
}

}  // namespace tessera::ops
