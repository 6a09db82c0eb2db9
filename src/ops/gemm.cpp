// implements: Gemm (ops/gemm.hpp): LibTorch's products as they are, or widened to fp32 inside autograd functions that
// save the 16-bit operands and round each result once.
#include "tessera/ops/gemm.hpp"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- the widened copies' bytes ----

std::atomic<std::int64_t> g_live{0}, g_peak{0};

// The fp32 copies of one scope: each kept tensor's bytes count as live until the scope ends.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { g_live.fetch_sub(bytes_); }

  at::Tensor keep(at::Tensor t) {
    const auto n = static_cast<std::int64_t>(t.nbytes());
    bytes_ += n;
    const std::int64_t live = g_live.fetch_add(n) + n;
    std::int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
    return t;
  }
  at::Tensor widen(const at::Tensor& t) { return keep(t.to(at::kFloat)); }

 private:
  std::int64_t bytes_ = 0;
};

bool is_lowp(c10::ScalarType t) { return t == at::kBFloat16 || t == at::kHalf; }

// ---- linear ----

// A widened block of weight rows is at most this many bytes, and so is a block of the gradient's columns.
constexpr std::int64_t kBlockBytes = std::int64_t{32} << 20;

// Rows of an (out, in) weight per block for `m` input rows: both fp32 blocks within kBlockBytes, at least 64 rows.
std::int64_t block_rows(std::int64_t out, std::int64_t in, std::int64_t m) {
  const std::int64_t per_row = 4 * std::max<std::int64_t>({in, m, 1});
  return std::clamp<std::int64_t>(kBlockBytes / per_row, 64, std::max<std::int64_t>(out, 1));
}

// x2 (M, in) lowp -> (M, out) lowp = round(x W^T + b), W widened block by block; b may be undefined.
at::Tensor linear_forward(const at::Tensor& x2, const at::Tensor& w, const at::Tensor& b) {
  const std::int64_t m = x2.size(0), out = w.size(0), rows = block_rows(out, w.size(1), m);
  Scratch scratch;
  const at::Tensor x32 = scratch.widen(x2);
  auto block = [&](Scratch& s, std::int64_t r0, std::int64_t n) {
    const at::Tensor w32 = s.widen(w.narrow(0, r0, n));
    return s.keep(b.defined() ? at::addmm(b.narrow(0, r0, n).to(at::kFloat), x32, w32.t()) : at::mm(x32, w32.t()));
  };
  if (rows >= out) {
    Scratch s;
    return block(s, 0, out).to(x2.scalar_type());
  }
  at::Tensor y = at::empty({m, out}, x2.options());
  for (std::int64_t r0 = 0; r0 < out; r0 += rows) {
    Scratch s;
    const std::int64_t n = std::min(rows, out - r0);
    y.narrow(1, r0, n).copy_(block(s, r0, n));
  }
  return y;
}

// Optional tensors: an autograd function's tensor arguments must be defined; nullopt is no argument at all (and its
// gradient no output), so an index into needs_input_grad() counts only the tensors given.
struct WidenedLinear : torch::autograd::Function<WidenedLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const std::optional<at::Tensor>& b) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["bias"] = b.has_value();
    std::vector<std::int64_t> out_shape = x.sizes().vec();
    out_shape.back() = w.size(0);
    return linear_forward(x.reshape({-1, x.size(-1)}), w, b.value_or(at::Tensor())).view(out_shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const bool need_x = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1),
               need_b = ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2);
    const auto dtype = x.scalar_type();
    const std::int64_t out = w.size(0), in = w.size(1);
    const at::Tensor g = grads[0].reshape({-1, out}).to(dtype);
    const std::int64_t m = g.size(0), rows = block_rows(out, in, m);
    const bool one_block = rows >= out;
    Scratch scratch;
    const at::Tensor x32 = need_w ? scratch.widen(x.reshape({-1, in})) : at::Tensor();
    at::Tensor gx32 = need_x ? scratch.keep(at::zeros({m, in}, x.options().dtype(at::kFloat))) : at::Tensor();
    at::Tensor gw = need_w && !one_block ? at::empty_like(w) : at::Tensor();
    at::Tensor gb = need_b && !one_block ? at::empty({out}, w.options()) : at::Tensor();
    for (std::int64_t r0 = 0; r0 < out; r0 += rows) {
      Scratch s;
      const std::int64_t n = std::min(rows, out - r0);
      const at::Tensor g32 = s.widen(g.narrow(1, r0, n));  // (M, n)
      if (need_x) {  // the weight block's copy goes before the weight gradient's block is made
        Scratch wide;
        gx32.addmm_(g32, wide.widen(w.narrow(0, r0, n)));
      }
      if (need_w) {
        const at::Tensor gw32 = s.keep(at::mm(g32.t(), x32));  // (n, in)
        if (one_block) gw = gw32.to(dtype);
        else gw.narrow(0, r0, n).copy_(gw32);
      }
      if (need_b) {
        const at::Tensor gb32 = g32.sum(0);
        if (one_block) gb = gb32.to(dtype);
        else gb.narrow(0, r0, n).copy_(gb32);
      }
    }
    return {need_x ? gx32.to(dtype).view(x.sizes()) : at::Tensor(), gw, gb};
  }
};

// ---- matmul ----

struct WidenedMatmul : torch::autograd::Function<WidenedMatmul> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    Scratch s;
    return s.keep(at::matmul(s.widen(a), s.widen(b))).to(a.scalar_type());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    const auto dtype = a.scalar_type();
    Scratch s;
    const at::Tensor g32 = s.widen(grads[0]);
    at::Tensor ga, gb;
    if (ctx->needs_input_grad(0)) ga = s.keep(at::matmul(g32, s.widen(b).transpose(-2, -1))).to(dtype);
    if (ctx->needs_input_grad(1)) gb = s.keep(at::matmul(s.widen(a).transpose(-2, -1), g32)).to(dtype);
    return {ga, gb};
  }
};

// ---- attention ----

// A boolean mask (true = attend) as the additive fp32 mask LibTorch's attention makes of it; an additive one in fp32.
at::Tensor additive_mask(const at::Tensor& mask) {
  if (!mask.defined()) return mask;
  if (mask.scalar_type() == at::kBool)
    return at::where(mask, at::zeros({}, mask.options().dtype(at::kFloat)),
                     at::full({}, -std::numeric_limits<float>::infinity(), mask.options().dtype(at::kFloat)));
  return mask.to(at::kFloat);
}

// A key or value widened, its heads repeated for their query heads (gqa): (B, Hk, S, E) -> (B, H, S, E) fp32.
at::Tensor widen_heads(Scratch& s, const at::Tensor& t, const at::Tensor& q) {
  const std::int64_t groups = q.size(-3) / t.size(-3);
  const at::Tensor wide = s.widen(t);
  return groups == 1 ? wide : s.keep(wide.repeat_interleave(groups, -3));
}

std::optional<double> scale_of(const c10::IValue& v) {
  return v.isNone() ? std::nullopt : std::optional<double>(v.toDouble());
}

struct WidenedAttention : torch::autograd::Function<WidenedAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::optional<at::Tensor>& mask_arg, bool causal, std::optional<double> scale) {
    const at::Tensor mask = mask_arg.value_or(at::Tensor());
    Scratch s;
    const at::Tensor m32 = mask.defined() ? s.keep(additive_mask(mask)) : at::Tensor();
    auto [out32, lse] = at::_scaled_dot_product_flash_attention_for_cpu(
        s.widen(q), widen_heads(s, k, q), widen_heads(s, v, q), 0.0, causal,
        m32.defined() ? std::optional<at::Tensor>(m32) : std::nullopt, scale);
    s.keep(out32);
    const at::Tensor out = out32.to(q.scalar_type());
    ctx->save_for_backward({q, k, v, out, lse, mask});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale ? c10::IValue(*scale) : c10::IValue();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4], &mask = saved[5];
    const auto dtype = q.scalar_type();
    const std::int64_t groups = q.size(-3) / k.size(-3);
    Scratch s;
    const at::Tensor m32 = mask.defined() ? s.keep(additive_mask(mask)) : at::Tensor();
    auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        s.widen(grads[0]), s.widen(q), widen_heads(s, k, q), widen_heads(s, v, q), s.widen(out), lse, 0.0,
        ctx->saved_data["causal"].toBool(),
        m32.defined() ? std::optional<at::Tensor>(m32) : std::nullopt, scale_of(ctx->saved_data["scale"]));
    for (at::Tensor* g : {&gq, &gk, &gv}) s.keep(*g);
    // The repeated heads' gradients add up into the key/value head they copy: (B, H, S, E) -> (B, Hk, S, E).
    auto fold = [&](const at::Tensor& g) {
      if (groups == 1) return g.to(dtype);
      std::vector<std::int64_t> shape = g.sizes().vec();
      shape.insert(shape.end() - 2, groups);
      shape[shape.size() - 4] /= groups;
      return g.view(shape).sum(-3).to(dtype);
    };
    return {gq.to(dtype), fold(gk), fold(gv), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// ---- conv2d ----

struct WidenedConv2d : torch::autograd::Function<WidenedConv2d> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const std::optional<at::Tensor>& b, std::int64_t stride) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["bias"] = b.has_value();
    ctx->saved_data["stride"] = stride;
    Scratch s;
    const at::Tensor b32 = b ? s.widen(*b) : at::Tensor();
    return s.keep(at::conv2d(s.widen(x), s.widen(w), b32, {stride, stride})).to(x.scalar_type());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const bool bias = ctx->saved_data["bias"].toBool();
    const std::int64_t stride = ctx->saved_data["stride"].toInt();
    const std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1), bias && ctx->needs_input_grad(2)};
    Scratch s;
    const std::vector<std::int64_t> bias_sizes{w.size(0)};
    auto [gx, gw, gb] = at::convolution_backward(s.widen(grads[0]), s.widen(x), s.widen(w),
                                                 bias ? at::OptionalIntArrayRef(bias_sizes) : std::nullopt,
                                                 {stride, stride}, {0, 0}, {1, 1}, false, {0, 0}, 1, mask);
    auto round = [&](const at::Tensor& g) { return g.defined() ? s.keep(g).to(x.scalar_type()) : g; };
    return {round(gx), round(gw), round(gb), at::Tensor()};
  }
};

std::optional<at::Tensor> optional(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

void check_same_dtype(const char* what, std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor& first = **ts.begin();
  for (const at::Tensor* t : ts)
    if (t->defined() && t->scalar_type() != first.scalar_type())
      throw Error(std::string("ops::Gemm::") + what + ": operands of dtypes " + c10::toString(first.scalar_type()) +
                  " and " + c10::toString(t->scalar_type()) + "; cast them to one dtype first");
}

}  // namespace

bool Gemm::widens(const at::Tensor& t) const { return lowp == Lowp::widen && is_lowp(t.scalar_type()); }

at::Tensor Gemm::linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const {
  if (!widens(x)) return at::linear(x, weight, bias);
  check_same_dtype("linear", {&x, &weight, &bias});
  return WidenedLinear::apply(x, weight, optional(bias));
}

at::Tensor Gemm::matmul(const at::Tensor& a, const at::Tensor& b) const {
  if (!widens(a)) return at::matmul(a, b);
  check_same_dtype("matmul", {&a, &b});
  if (a.dim() != b.dim() || a.dim() < 2 || a.sizes().slice(0, a.dim() - 2) != b.sizes().slice(0, b.dim() - 2))
    throw Error("ops::Gemm::matmul: shapes " + c10::str(a.sizes()) + " and " + c10::str(b.sizes()) +
                " must have the same batch dimensions");
  return WidenedMatmul::apply(a, b);
}

at::Tensor Gemm::attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const std::optional<at::Tensor>& mask, bool causal, std::optional<double> scale,
                           bool gqa) const {
  if (!widens(q)) return at::scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale, gqa);
  check_same_dtype("attention", {&q, &k, &v});
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.size(1) != v.size(1) || q.size(1) % k.size(1) != 0 ||
      (!gqa && q.size(1) != k.size(1)))
    throw Error("ops::Gemm::attention: q " + c10::str(q.sizes()) + ", k " + c10::str(k.sizes()) + ", v " +
                c10::str(v.sizes()) + " are not (B, H, L, E), (B, Hk, S, E), (B, Hk, S, Ev) with Hk = H, or Hk "
                "dividing H under gqa");
  return WidenedAttention::apply(q, k, v, mask && mask->defined() ? mask : std::nullopt, causal, scale);
}

at::Tensor Gemm::conv2d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        std::int64_t stride) const {
  if (!widens(x)) return at::conv2d(x, weight, bias, {stride, stride});
  check_same_dtype("conv2d", {&x, &weight, &bias});
  return WidenedConv2d::apply(x, weight, optional(bias), stride);
}

std::int64_t widened_live_bytes() { return g_live.load(); }

std::int64_t take_widened_peak() { return g_peak.exchange(g_live.load()); }

}  // namespace tessera::ops
