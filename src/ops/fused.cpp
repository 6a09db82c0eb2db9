// implements: rms_norm, gated, layer_norm_linear and gelu_linear (ops/fused.hpp), rms_norm_linear and gated_linear
// (ops/norm_linear.hpp): autograd functions that keep their inputs only.
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
#include "tessera/ops/norm_linear.hpp"

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

// RMSNorm's forward: the normalized x before the weight (LibTorch's fused kernel, or the form's fp32 ops) and the
// fp32 1/rms per row.
std::pair<at::Tensor, at::Tensor> rms_normalize(const at::Tensor& x, const at::Tensor& weight, double eps, RmsForm form,
                                                bool fused) {
  if (fused) {
    auto [normed, rstd] = at::_fused_rms_norm(x, {x.size(-1)}, std::nullopt, eps);
    return {normed, rstd};
  }
  at::Tensor rstd = inverse_rms(x, eps);
  return {normalized(x, weight, rstd, form), rstd};
}

// The normalized x again in backward, from the saved 1/rms (the fused kernel recomputes it).
at::Tensor renormalize(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& rstd, double eps, RmsForm form,
                       bool fused) {
  return fused ? std::get<0>(at::_fused_rms_norm(x, {x.size(-1)}, std::nullopt, eps))
               : normalized(x, weight, rstd, form);
}

// The gradients of weight * n(x) for the gradient g of its output, as autograd differentiates the forward's ops:
// dweight = sum_to(g * n) and dn = g * weight; then n's own chain (the fused kernel's backward, or the fp32 ops'
// derivatives: n = h * r with r = rsqrt(m + eps), m = mean(p), p = h^2, h = x in fp32). Each when asked; `normed`
// is n when the caller has recomputed it already (undefined: recomputed here when dweight needs it).
void rms_norm_backward(const at::Tensor& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& rstd,
                       double eps, RmsForm form, bool fused, bool need_x, bool need_weight, const at::Tensor& normed,
                       at::Tensor& dx, at::Tensor& dweight) {
  if (need_weight)
    dweight = at::sum_to(g * (normed.defined() ? normed : renormalize(x, weight, rstd, eps, form, fused)),
                         weight.sizes());
  if (!need_x) return;
  if (fused) {
    const at::Tensor dn = g * weight;
    // A dry run's meta tensors (predict/): the kernel has no meta implementation; its result is one tensor like x,
    // which is all the prediction needs.
    dx = x.is_meta() ? at::empty_like(x)
                     : std::get<0>(at::_fused_rms_norm_backward(dn, x, {x.size(-1)}, rstd, std::nullopt,
                                                                {true, false}));
    return;
  }
  const at::Tensor h = x.to(at::kFloat);
  const at::Tensor dn = (g * weight).to(at::kFloat);                          // through the cast, if any
  const at::Tensor dr = at::sum_to(dn * h, rstd.sizes());                     // n = h * r
  const at::Tensor dm = -0.5 * dr * rstd.pow(3);                              // r = rsqrt(m + eps)
  const at::Tensor dp = dm.expand_as(h) / static_cast<double>(h.size(-1));    // m = mean(p, -1)
  const at::Tensor direct = dn * rstd, through_square = dp * (2 * h);         // p = h^2
  // llama: both paths meet in fp32 (h = x.to(fp32)), then one cast; t5: x enters each path itself, so each
  // gradient is cast to x's dtype and the two are added there.
  const auto x_dtype = x.scalar_type();
  dx = form == RmsForm::llama ? (direct + through_square).to(x_dtype)
                              : direct.to(x_dtype) + through_square.to(x_dtype);
}

struct RmsNorm : torch::autograd::Function<RmsNorm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps,
                            int64_t form, bool fused) {
    auto [normed, rstd] = rms_normalize(x, weight, eps, static_cast<RmsForm>(form), fused);
    ctx->save_for_backward({x, weight, rstd});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["form"] = form;
    ctx->saved_data["fused"] = fused;
    return weight * normed;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor dx, dweight;
    rms_norm_backward(grads[0], saved[0], saved[1], saved[2], ctx->saved_data["eps"].toDouble(),
                      static_cast<RmsForm>(ctx->saved_data["form"].toInt()), ctx->saved_data["fused"].toBool(),
                      ctx->needs_input_grad(0), ctx->needs_input_grad(1), at::Tensor(), dx, dweight);
    return {dx, dweight, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor activate(const at::Tensor& gate, GateAct act) {
  return act == GateAct::silu ? at::silu(gate) : at::gelu(gate, "tanh");
}

// The gradients of act(gate) * up for the gradient g of its output, each when asked.
void gated_backward(const at::Tensor& g, const at::Tensor& gate, const at::Tensor& up, GateAct act, bool need_gate,
                    bool need_up, at::Tensor& dgate, at::Tensor& dup) {
  if (need_gate) {
    const at::Tensor d = g * up;
    dgate = act == GateAct::silu ? at::silu_backward(d, gate) : at::gelu_backward(d, gate, "tanh");
  }
  if (need_up) dup = g * activate(gate, act);
}

struct Gated : torch::autograd::Function<Gated> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up, int64_t act) {
    ctx->save_for_backward({gate, up});
    ctx->saved_data["act"] = act;
    return activate(gate, static_cast<GateAct>(act)) * up;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor dgate, dup;
    gated_backward(grads[0], saved[0], saved[1], static_cast<GateAct>(ctx->saved_data["act"].toInt()),
                   ctx->needs_input_grad(0), ctx->needs_input_grad(1), dgate, dup);
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

// Edges: x, norm weight, the n weights.
struct RmsNormLinear : torch::autograd::Function<RmsNormLinear> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& norm_weight,
                               at::TensorList weights, double eps, int64_t form, bool fused, int64_t lowp) {
    const Gemm gemm{static_cast<Lowp>(lowp)};
    auto [normed, rstd] = rms_normalize(x, norm_weight, eps, static_cast<RmsForm>(form), fused);
    const at::Tensor h = norm_weight * normed;
    variable_list out, saved{x, norm_weight, rstd};
    for (const at::Tensor& w : weights) {
      out.push_back(gemm.linear(h, w, at::Tensor()));
      saved.push_back(w);
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["form"] = form;
    ctx->saved_data["fused"] = fused;
    ctx->saved_data["lowp"] = lowp;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &norm_weight = saved[1], &rstd = saved[2];
    const std::size_t n = saved.size() - 3;
    const Gemm gemm{static_cast<Lowp>(ctx->saved_data["lowp"].toInt())};
    const double eps = ctx->saved_data["eps"].toDouble();
    const auto form = static_cast<RmsForm>(ctx->saved_data["form"].toInt());
    const bool fused = ctx->saved_data["fused"].toBool();
    const bool need_x = ctx->needs_input_grad(0), need_norm_weight = ctx->needs_input_grad(1);
    at::Tensor normed, h;  // recomputed once, the first time a weight (or the norm's weight) needs them
    const auto normed_x = [&] {
      if (!normed.defined()) normed = renormalize(x, norm_weight, rstd, eps, form, fused);
      return normed;
    };
    const auto h_rows = [&] {
      if (!h.defined()) h = rows(norm_weight * normed_x());
      return h;
    };
    variable_list out(2 + n + 4);
    at::Tensor dh, unused_bias;
    for (std::size_t i = 0; i < n; ++i) {
      const at::Tensor d = linear_backward(gemm, ctx, grads[i], saved[3 + i], false, 2 + i, 0,
                                           need_x || need_norm_weight, h_rows, out[2 + i], unused_bias);
      if (d.defined()) dh = dh.defined() ? dh + d : d;
    }
    if (need_x || need_norm_weight)
      rms_norm_backward(dh.view(x.sizes()), x, norm_weight, rstd, eps, form, fused, need_x, need_norm_weight,
                        need_norm_weight ? normed_x() : at::Tensor(), out[0], out[1]);
    return out;
  }
};

// Edges: gate, up, weight.
struct GatedLinear : torch::autograd::Function<GatedLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up,
                            const at::Tensor& weight, int64_t act, int64_t lowp) {
    ctx->save_for_backward({gate, up, weight});
    ctx->saved_data["act"] = act;
    ctx->saved_data["lowp"] = lowp;
    return Gemm{static_cast<Lowp>(lowp)}.linear(activate(gate, static_cast<GateAct>(act)) * up, weight, at::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &gate = saved[0], &up = saved[1], &weight = saved[2];
    const auto act = static_cast<GateAct>(ctx->saved_data["act"].toInt());
    const Gemm gemm{static_cast<Lowp>(ctx->saved_data["lowp"].toInt())};
    const bool need_gate = ctx->needs_input_grad(0), need_up = ctx->needs_input_grad(1);
    variable_list out(5);
    at::Tensor unused_bias;
    const at::Tensor da = linear_backward(gemm, ctx, grads[0], weight, false, 2, 0, need_gate || need_up,
                                          [&] { return rows(activate(gate, act) * up); }, out[2], unused_bias);
    if (da.defined()) gated_backward(da.view(gate.sizes()), gate, up, act, need_gate, need_up, out[0], out[1]);
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

std::vector<at::Tensor> rms_norm_linear(const Gemm& gemm, const at::Tensor& x, const at::Tensor& norm_weight,
                                        double eps, RmsForm form, bool fused, at::TensorList weights) {
  if (weights.empty()) throw Error("ops::rms_norm_linear: no linear layer to feed");
  if (fused && form != RmsForm::llama)
    throw Error("ops::rms_norm_linear: the fused kernels compute the llama form only");
  // Autograd takes no undefined tensor as an input.
  if (!norm_weight.defined() || std::any_of(weights.begin(), weights.end(), [](const at::Tensor& t) {
        return !t.defined();
      }))
    throw Error("ops::rms_norm_linear: an undefined norm weight or weight; every tensor it takes must be defined");
  return RmsNormLinear::apply(x, norm_weight, weights, eps, static_cast<int64_t>(form), fused,
                              static_cast<int64_t>(gemm.lowp));
}

at::Tensor gated_linear(const Gemm& gemm, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& weight,
                        GateAct act) {
  return GatedLinear::apply(gate, up, weight, static_cast<int64_t>(act), static_cast<int64_t>(gemm.lowp));
}

}  // namespace tessera::ops
