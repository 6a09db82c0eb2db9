// tests for ops/fused.hpp's layer_norm_linear and gelu_linear: the op-by-op form's values and gradients (fp32 to the
// order of summation, bf16 to its rounding, the widened path included), no gradient computed for a frozen weight,
// and the memory they keep after forward (on the counting meta device): the op-by-op form's less exactly the
// normalized copy, or gelu(x). rms_norm and gated are checked through the Llama and T5 families against
// transformers (tests/reference).
// LibTorch before Catch2: glog's CHECK (pulled in by c10) must not replace Catch2's when built without the PCH.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/memory/counting_meta_allocator.hpp"
#include "tessera/ops/fused.hpp"
#include "tessera/ops/gemm.hpp"
#include "tessera/predict/dry_run.hpp"

#include <catch2/catch.hpp>

using namespace tessera;
using ops::Gemm;
using ops::Lowp;

namespace {

constexpr double kEps = 1e-5;

// Leaves for one case: x (B, T, H), the norm's weight and bias, and n linear layers (out_i, H) with or without biases.
struct Leaves {
  at::Tensor x, norm_w, norm_b;
  std::vector<at::Tensor> weights, biases;
  std::vector<at::Tensor> all() const {
    std::vector<at::Tensor> v{x, norm_w, norm_b};
    v.insert(v.end(), weights.begin(), weights.end());
    for (const at::Tensor& b : biases)
      if (b.defined()) v.push_back(b);
    return v;
  }
};

at::Tensor leaf(std::vector<std::int64_t> shape, c10::ScalarType t, bool grad = true, double scale = 1.0,
                double shift = 0.0) {
  return (at::randn(shape) * scale + shift).to(t).requires_grad_(grad);
}

Leaves make_leaves(c10::ScalarType t, const std::vector<std::int64_t>& outs, bool biases, bool frozen = false) {
  Leaves l{leaf({2, 5, 16}, t, true, 2.0, 0.5), leaf({16}, t, !frozen, 0.2, 1.0), leaf({16}, t, !frozen, 0.2)};
  for (std::int64_t out : outs) {
    l.weights.push_back(leaf({out, 16}, t, !frozen, 0.25));
    l.biases.push_back(biases ? leaf({out}, t, !frozen) : at::Tensor());
  }
  return l;
}

// The same leaves again, detached copies (each case runs the fused and the op-by-op form on its own leaves).
Leaves copy(const Leaves& l) {
  const auto c = [](const at::Tensor& t) {
    return t.defined() ? t.detach().clone().requires_grad_(t.requires_grad()) : at::Tensor();
  };
  Leaves out{c(l.x), c(l.norm_w), c(l.norm_b), {}, {}};
  for (const at::Tensor& w : l.weights) out.weights.push_back(c(w));
  for (const at::Tensor& b : l.biases) out.biases.push_back(c(b));
  return out;
}

std::vector<at::Tensor> op_by_op(const Gemm& gemm, const Leaves& l) {
  const at::Tensor h = at::layer_norm(l.x, {l.x.size(-1)}, l.norm_w, l.norm_b, kEps);
  std::vector<at::Tensor> y;
  for (std::size_t i = 0; i < l.weights.size(); ++i) y.push_back(gemm.linear(h, l.weights[i], l.biases[i]));
  return y;
}

std::vector<at::Tensor> fused(const Gemm& gemm, const Leaves& l) {
  const bool biased = l.biases[0].defined();
  return ops::layer_norm_linear(gemm, l.x, l.norm_w, l.norm_b, kEps, l.weights,
                                biased ? at::TensorList(l.biases) : at::TensorList());
}

// max |a - b| / max(|b|, 1e-30) over all elements.
double relative_gap(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a64 = a.detach().to(at::kDouble), b64 = b.detach().to(at::kDouble);
  return ((a64 - b64).abs().max() / b64.abs().max().clamp_min(1e-30)).item<double>();
}

// Runs both forms on copies of the same leaves with the same output gradients, and checks the outputs and every
// leaf's gradient agree within `tol` (relative to the largest magnitude); a leaf that needs no gradient gets none.
void check_same(const Gemm& gemm, const Leaves& leaves, double tol) {
  const Leaves a = copy(leaves), b = copy(leaves);
  const std::vector<at::Tensor> ya = fused(gemm, a), yb = op_by_op(gemm, b);
  REQUIRE(ya.size() == yb.size());
  std::vector<at::Tensor> grads;
  for (std::size_t i = 0; i < ya.size(); ++i) {
    INFO("output " << i);
    CHECK(ya[i].scalar_type() == yb[i].scalar_type());
    CHECK(relative_gap(ya[i], yb[i]) <= tol);
    grads.push_back(at::randn(ya[i].sizes()).to(ya[i].scalar_type()));
  }
  torch::autograd::backward(ya, grads);
  torch::autograd::backward(yb, grads);
  const std::vector<at::Tensor> la = a.all(), lb = b.all();
  for (std::size_t i = 0; i < la.size(); ++i) {
    INFO("leaf " << i);
    if (!lb[i].requires_grad()) {
      CHECK_FALSE(la[i].grad().defined());
      continue;
    }
    REQUIRE(la[i].grad().defined());
    CHECK(relative_gap(la[i].grad(), lb[i].grad()) <= tol);
  }
}

}  // namespace

TEST_CASE("layer_norm_linear is LayerNorm then each linear layer, forward and backward", "[ops][fused]") {
  at::manual_seed(1);
  const Gemm native{Lowp::native};
  SECTION("fp32, three layers with biases (ViT's q, k, v)") {
    check_same(native, make_leaves(at::kFloat, {16, 8, 24}, true), 1e-5);
  }
  SECTION("fp32, one layer without a bias") { check_same(native, make_leaves(at::kFloat, {32}, false), 1e-5); }
  SECTION("fp32, frozen norm and weights: only x gets a gradient") {
    check_same(native, make_leaves(at::kFloat, {16, 16}, true, /*frozen=*/true), 1e-5);
  }
  // bf16: the same ops in the same dtype; the weight gradients' row sums may round in another order.
  SECTION("bf16") { check_same(native, make_leaves(at::kBFloat16, {16, 8}, true), 4e-3); }
  SECTION("bf16 through the widened products") {
    check_same(Gemm{Lowp::widen}, make_leaves(at::kBFloat16, {16, 8}, true), 4e-3);
  }
}

TEST_CASE("gelu_linear is the exact GELU then the linear layer, forward and backward", "[ops][fused]") {
  at::manual_seed(2);
  for (const Lowp lowp : {Lowp::native, Lowp::widen})
    for (const c10::ScalarType t : {at::kFloat, at::kBFloat16})
      for (const bool bias : {true, false}) {
        const Gemm gemm{lowp};
        INFO("dtype " << c10::toString(t) << (lowp == Lowp::widen ? " widened" : "") << (bias ? " with" : " without")
                      << " bias");
        const at::Tensor x = leaf({3, 4, 32}, t), w = leaf({12, 32}, t, true, 0.2);
        const at::Tensor b = bias ? leaf({12}, t) : at::Tensor();
        std::vector<at::Tensor> a{x.detach().clone().requires_grad_(true), w.detach().clone().requires_grad_(true)};
        std::vector<at::Tensor> r{x.detach().clone().requires_grad_(true), w.detach().clone().requires_grad_(true)};
        if (bias) {
          a.push_back(b.detach().clone().requires_grad_(true));
          r.push_back(b.detach().clone().requires_grad_(true));
        }
        const at::Tensor ya = ops::gelu_linear(gemm, a[0], a[1], bias ? a[2] : at::Tensor());
        const at::Tensor yr = gemm.linear(at::gelu(r[0]), r[1], bias ? r[2] : at::Tensor());
        const double tol = t == at::kFloat ? 1e-5 : 4e-3;
        CHECK(relative_gap(ya, yr) <= tol);
        const at::Tensor g = at::randn(ya.sizes()).to(t);
        ya.backward(g);
        yr.backward(g);
        for (std::size_t i = 0; i < a.size(); ++i) {
          INFO("leaf " << i);
          REQUIRE(a[i].grad().defined());
          CHECK(relative_gap(a[i].grad(), r[i].grad()) <= tol);
        }
      }
}

TEST_CASE("gelu_linear with a frozen weight: x gets its gradient, the weight none", "[ops][fused]") {
  const at::Tensor x = leaf({4, 8}, at::kFloat), w = leaf({6, 8}, at::kFloat, /*grad=*/false);
  ops::gelu_linear(Gemm{}, x, w, at::Tensor()).sum().backward();
  CHECK(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("after forward the fused nodes keep x, not the normalized copy nor gelu(x)", "[ops][fused]") {
  memory::install_counting_meta_allocator();
  predict::register_meta_kernels();  // LayerNorm on meta tensors, as a dry run has it
  const c10::Device meta(c10::DeviceType::Meta);
  const auto opts = at::TensorOptions().device(meta).dtype(at::kBFloat16);
  const std::int64_t rows = 4 * 64, hidden = 128, ff = 512, elem = 2;
  const at::Tensor x = at::empty({4, 64, hidden}, opts).requires_grad_(true);
  const auto leaf_of = [&](std::vector<std::int64_t> shape) { return at::empty(shape, opts).requires_grad_(true); };
  const at::Tensor nw = leaf_of({hidden}), nb = leaf_of({hidden}), w1 = leaf_of({ff, hidden}), b1 = leaf_of({ff});
  const at::Tensor w2 = leaf_of({hidden, ff});
  const Gemm gemm{};
  // The bytes the graph of f(...) and its output hold after f returns.
  const auto held = [&](const std::function<at::Tensor()>& f) {
    const std::int64_t before = memory::allocator_stats(meta).allocated;
    const at::Tensor y = f();
    return memory::allocator_stats(meta).allocated - before;
  };
  const std::int64_t split = held([&] { return at::linear(at::layer_norm(x, {hidden}, nw, nb, kEps), w1, b1); });
  const std::int64_t one = held([&] { return ops::layer_norm_linear(gemm, x, nw, nb, kEps, {w1}, {b1})[0]; });
  CHECK(split - one == rows * hidden * elem);  // the normalized copy
  const at::Tensor f = at::empty({4, 64, ff}, opts).requires_grad_(true);
  const std::int64_t mlp_split = held([&] { return at::linear(at::gelu(f), w2); });
  const std::int64_t mlp_one = held([&] { return ops::gelu_linear(gemm, f, w2, at::Tensor()); });
  CHECK(mlp_split - mlp_one == rows * ff * elem);  // gelu(f)
  // And the backward still runs on meta tensors (what a dry run does).
  at::Tensor y = ops::gelu_linear(gemm, ops::layer_norm_linear(gemm, x, nw, nb, kEps, {w1}, {b1})[0], w2, at::Tensor());
  y.sum().backward();
  CHECK(x.grad().sizes() == x.sizes());
  CHECK(w1.grad().sizes() == w1.sizes());
}

TEST_CASE("layer_norm_linear refuses a bias count other than the weights'", "[ops][fused]") {
  const at::Tensor x = at::randn({2, 4}), w = at::randn({3, 4}), b = at::randn({3});
  CHECK_THROWS_WITH(ops::layer_norm_linear(Gemm{}, x, at::ones({4}), at::zeros({4}), kEps, {w, w}, {b}),
                    Catch::Contains("1 biases for 2 weights"));
  CHECK_THROWS_WITH(ops::layer_norm_linear(Gemm{}, x, at::ones({4}), at::zeros({4}), kEps, {}, {}),
                    Catch::Contains("no linear layer"));
  CHECK_THROWS_WITH(ops::layer_norm_linear(Gemm{}, x, at::ones({4}), at::zeros({4}), kEps, {w}, {at::Tensor()}),
                    Catch::Contains("undefined"));
}
