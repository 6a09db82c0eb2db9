// tests for ops/norm_linear.hpp's rms_norm_linear and gated_linear: the op-by-op form's values and gradients (ops::
// rms_norm then each linear layer, ops::gated then the linear layer; fp32 to the order of summation, bf16 to its
// rounding, the widened path included; both RMSNorm forms), no gradient computed for a frozen weight, the memory
// they keep after forward (on the counting meta device: the op-by-op form's less exactly the normalized copy, or
// act(gate) * up) and their refusals. The Llama and T5 families run them against transformers (tests/reference).
// LibTorch before Catch2: glog's CHECK (pulled in by c10) must not replace Catch2's when built without the PCH.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "support.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/memory/counting_meta_allocator.hpp"
#include "tessera/ops/fused.hpp"
#include "tessera/ops/gemm.hpp"
#include "tessera/ops/norm_linear.hpp"
#include "tessera/predict/dry_run.hpp"

#include <catch2/catch.hpp>

using namespace tessera;
using ops::Gemm;
using ops::Lowp;
using testing::max_rel_diff;

namespace {

constexpr double kEps = 1e-6;

at::Tensor leaf(std::vector<std::int64_t> shape, c10::ScalarType t, bool grad = true, double scale = 1.0,
                double shift = 0.0) {
  return (at::randn(shape) * scale + shift).to(t).requires_grad_(grad);
}

// A detached copy that needs a gradient when v does (each form runs on its own leaves).
at::Tensor copy_leaf(const at::Tensor& v) { return v.detach().clone().requires_grad_(v.requires_grad()); }

// After both forms' backward: every leaf of the node under test (a) has the reference's (r) gradient within tol,
// and a leaf that needs none gets none.
void check_leaf_grads(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& r, double tol) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("leaf " << i);
    if (!r[i].requires_grad()) {
      CHECK_FALSE(a[i].grad().defined());
      continue;
    }
    REQUIRE(a[i].grad().defined());
    CHECK(max_rel_diff(a[i].grad(), r[i].grad()) <= tol);
  }
}

}  // namespace

namespace {

// rms_norm_linear against ops::rms_norm then each linear layer, and gated_linear against gated then the linear
// layer: outputs and every leaf's gradient within tol; a frozen leaf gets none.
void check_rms_norm_linear(const Gemm& gemm, c10::ScalarType t, ops::RmsForm form, bool frozen, double tol) {
  const at::Tensor x = leaf({2, 5, 16}, t, true, 2.0, 0.5), nw = leaf({16}, t, !frozen, 0.2, 1.0);
  const std::vector<at::Tensor> ws{leaf({16, 16}, t, !frozen, 0.25), leaf({8, 16}, t, !frozen, 0.25),
                                   leaf({24, 16}, t, !frozen, 0.25)};
  std::vector<at::Tensor> a{copy_leaf(x), copy_leaf(nw)}, r{copy_leaf(x), copy_leaf(nw)};
  for (const at::Tensor& w : ws) {
    a.push_back(copy_leaf(w));
    r.push_back(copy_leaf(w));
  }
  const std::vector<at::Tensor> ya =
      ops::rms_norm_linear(gemm, a[0], a[1], kEps, form, false, at::TensorList(a).slice(2));
  const at::Tensor h = ops::rms_norm(r[0], r[1], kEps, form);
  std::vector<at::Tensor> yr, grads;
  for (std::size_t i = 0; i < ws.size(); ++i) yr.push_back(gemm.linear(h, r[2 + i], at::Tensor()));
  REQUIRE(ya.size() == yr.size());
  for (std::size_t i = 0; i < ya.size(); ++i) {
    INFO("output " << i);
    CHECK(ya[i].scalar_type() == yr[i].scalar_type());
    CHECK(max_rel_diff(ya[i], yr[i]) <= tol);
    grads.push_back(at::randn(ya[i].sizes()).to(ya[i].scalar_type()));
  }
  torch::autograd::backward(ya, grads);
  torch::autograd::backward(yr, grads);
  check_leaf_grads(a, r, tol);
}

}  // namespace

TEST_CASE("rms_norm_linear is RMSNorm then each linear layer, forward and backward", "[ops][fused]") {
  at::manual_seed(4);
  struct Case {
    const char* what;
    Lowp lowp;
    c10::ScalarType dtype;
    bool frozen;
    double tol;
  };
  // bf16: the same ops in the same dtype; x's gradient sums the layers' parts in another order.
  const Case cases[] = {{"fp32", Lowp::native, at::kFloat, false, 1e-5},
                        {"fp32, frozen norm and weights: only x gets a gradient", Lowp::native, at::kFloat, true, 1e-5},
                        {"bf16", Lowp::native, at::kBFloat16, false, 8e-3},
                        {"bf16 through the widened products", Lowp::widen, at::kBFloat16, false, 8e-3}};
  for (const ops::RmsForm form : {ops::RmsForm::llama, ops::RmsForm::t5})
    for (const Case& c : cases) {
      INFO((form == ops::RmsForm::llama ? "LlamaRMSNorm, " : "T5LayerNorm, ") << c.what);
      check_rms_norm_linear(Gemm{c.lowp}, c.dtype, form, c.frozen, c.tol);
    }
}

TEST_CASE("gated_linear is act(gate) * up then the linear layer, forward and backward", "[ops][fused]") {
  at::manual_seed(5);
  for (const Lowp lowp : {Lowp::native, Lowp::widen})
    for (const c10::ScalarType t : {at::kFloat, at::kBFloat16})
      for (const ops::GateAct act : {ops::GateAct::silu, ops::GateAct::gelu_tanh})
        for (const bool frozen : {false, true}) {
          const Gemm gemm{lowp};
          INFO("dtype " << c10::toString(t) << (lowp == Lowp::widen ? " widened" : "")
                        << (act == ops::GateAct::silu ? " silu" : " gelu_tanh") << (frozen ? " frozen weight" : ""));
          const at::Tensor gate = leaf({3, 4, 32}, t), up = leaf({3, 4, 32}, t), w = leaf({12, 32}, t, !frozen, 0.2);
          const std::vector<at::Tensor> a{copy_leaf(gate), copy_leaf(up), copy_leaf(w)},
              r{copy_leaf(gate), copy_leaf(up), copy_leaf(w)};
          const at::Tensor ya = ops::gated_linear(gemm, a[0], a[1], a[2], act);
          const at::Tensor yr = gemm.linear(ops::gated(r[0], r[1], act), r[2], at::Tensor());
          const double tol = t == at::kFloat ? 1e-5 : 4e-3;
          CHECK(max_rel_diff(ya, yr) <= tol);
          const at::Tensor g = at::randn(ya.sizes()).to(t);
          ya.backward(g);
          yr.backward(g);
          check_leaf_grads(a, r, tol);
        }
}

TEST_CASE("after forward rms_norm_linear and gated_linear keep their inputs, not the normed copy nor the product",
          "[ops][fused]") {
  memory::install_counting_meta_allocator();
  predict::register_meta_kernels();
  const c10::Device meta(c10::DeviceType::Meta);
  const auto opts = at::TensorOptions().device(meta).dtype(at::kBFloat16);
  const std::int64_t rows = 4 * 64, hidden = 128, ff = 512, elem = 2;
  const auto leaf_of = [&](std::vector<std::int64_t> shape) { return at::empty(shape, opts).requires_grad_(true); };
  const at::Tensor x = leaf_of({4, 64, hidden}), nw = leaf_of({hidden}), wq = leaf_of({hidden, hidden}),
                   wk = leaf_of({hidden, hidden}), wd = leaf_of({hidden, ff});
  const at::Tensor gate = leaf_of({4, 64, ff}), up = leaf_of({4, 64, ff});
  const Gemm gemm{};
  const auto held = [&](const std::function<std::vector<at::Tensor>()>& f) {
    const std::int64_t before = memory::allocator_stats(meta).allocated;
    const std::vector<at::Tensor> y = f();
    return memory::allocator_stats(meta).allocated - before;
  };
  for (const ops::RmsForm form : {ops::RmsForm::llama, ops::RmsForm::t5}) {
    INFO((form == ops::RmsForm::llama ? "llama" : "t5"));
    const std::int64_t split = held([&] {
      const at::Tensor h = ops::rms_norm(x, nw, kEps, form);
      return std::vector<at::Tensor>{gemm.linear(h, wq, at::Tensor()), gemm.linear(h, wk, at::Tensor())};
    });
    const std::int64_t one = held([&] { return ops::rms_norm_linear(gemm, x, nw, kEps, form, false, {wq, wk}); });
    CHECK(split - one == rows * hidden * elem);  // the normalized copy, which both linear layers kept
  }
  const std::int64_t mlp_split = held([&] {
    return std::vector<at::Tensor>{gemm.linear(ops::gated(gate, up, ops::GateAct::silu), wd, at::Tensor())};
  });
  const std::int64_t mlp_one = held([&] {
    return std::vector<at::Tensor>{ops::gated_linear(gemm, gate, up, wd, ops::GateAct::silu)};
  });
  CHECK(mlp_split - mlp_one == rows * ff * elem);  // silu(gate) * up
  // And backward runs on meta tensors (what a dry run does).
  const std::vector<at::Tensor> gu = ops::rms_norm_linear(gemm, x, nw, kEps, ops::RmsForm::llama, false, {wq, wk});
  ops::gated_linear(gemm, gu[0], gu[1], wq, ops::GateAct::silu).sum().backward();
  CHECK(x.grad().sizes() == x.sizes());
  CHECK(nw.grad().sizes() == nw.sizes());
  CHECK(wk.grad().sizes() == wk.sizes());
}

TEST_CASE("rms_norm_linear refuses no layers, an undefined tensor and the fused T5 form", "[ops][fused]") {
  const at::Tensor x = at::randn({2, 4}), w = at::randn({3, 4});
  CHECK_THROWS_WITH(ops::rms_norm_linear(Gemm{}, x, at::ones({4}), kEps, ops::RmsForm::llama, false, {}),
                    Catch::Contains("no linear layer"));
  CHECK_THROWS_WITH(ops::rms_norm_linear(Gemm{}, x, at::ones({4}), kEps, ops::RmsForm::llama, false, {at::Tensor()}),
                    Catch::Contains("undefined"));
  CHECK_THROWS_WITH(ops::rms_norm_linear(Gemm{}, x, at::ones({4}), kEps, ops::RmsForm::t5, true, {w}),
                    Catch::Contains("llama form only"));
}
