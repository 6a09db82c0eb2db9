// The fused CPU AdamW against LibTorch's own torch::optim::AdamW, and its grad / param_out dtypes and errors.
// LibTorch before Catch: glog (via torch/optim) defines CHECK too, and Catch's must be the last definition.
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>

#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "support.hpp"
#include "tessera/optim/cpu_adamw.hpp"

using tessera::optim::cpu_adamw_step;
using tessera::optim::CpuAdamWHyper;
using tessera::testing::max_rel_diff;

namespace {

struct Adam {
  at::Tensor param, exp_avg, exp_avg_sq;
  explicit Adam(const at::Tensor& init)
      : param(init.clone()), exp_avg(at::zeros_like(init)), exp_avg_sq(at::zeros_like(init)) {}
};

// Magnitudes spread over many binades, so that the casts meet fp16 overflow and subnormals.
at::Tensor spread(std::int64_t n, double lo_exp, double hi_exp) {
  return at::randn({n}) * at::pow(10.0, at::rand({n}) * (hi_exp - lo_exp) + lo_exp);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tessera::Error& e) {
    return e.what();
  }
  return "no tessera::Error";
}

}  // namespace

TEST_CASE("cpu_adamw_step equals torch::optim::AdamW over 100 steps (fp32)", "[optim]") {
  at::manual_seed(5);
  const std::int64_t n = 100003;  // odd: uneven thread chunks and vector tails
  const at::Tensor init = at::randn({n});
  Adam ours(init);
  at::Tensor theirs = init.clone().requires_grad_(true);
  torch::optim::AdamW reference({theirs},
                                torch::optim::AdamWOptions(1e-2).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
  for (int step = 1; step <= 100; ++step) {
    const at::Tensor grad = at::randn({n}) * (1.0 + step % 7) * (step % 3 == 0 ? 1e-3 : 1.0);
    cpu_adamw_step(ours.param, ours.exp_avg, ours.exp_avg_sq, grad, CpuAdamWHyper{1e-2, 0.9, 0.999, 1e-8, 0.01, step});
    theirs.mutable_grad() = grad.clone();
    reference.step();
  }
  const auto& state = static_cast<const torch::optim::AdamWParamState&>(
      *reference.state().at(theirs.unsafeGetTensorImpl()));
  CHECK(max_rel_diff(ours.param, theirs) < 1e-6);
  CHECK(max_rel_diff(ours.exp_avg, state.exp_avg()) < 1e-6);
  CHECK(max_rel_diff(ours.exp_avg_sq, state.exp_avg_sq()) < 1e-6);
  CHECK(max_rel_diff(ours.param, init) > 1e-2);
}

TEST_CASE("cpu_adamw_step gives the same bits on one thread and on several", "[optim]") {
  at::manual_seed(6);
  const std::int64_t n = (1 << 20) + 7;  // above TensorIterator's grain, so it splits
  const at::Tensor init = at::randn({n}), grad = at::randn({n});
  Adam one(init), many(init);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  cpu_adamw_step(one.param, one.exp_avg, one.exp_avg_sq, grad, CpuAdamWHyper{.weight_decay = 0.1});
  at::set_num_threads(3);
  cpu_adamw_step(many.param, many.exp_avg, many.exp_avg_sq, grad, CpuAdamWHyper{.weight_decay = 0.1});
  at::set_num_threads(threads);
  CHECK(at::equal(one.param, many.param));
  CHECK(at::equal(one.exp_avg_sq, many.exp_avg_sq));
  CHECK_FALSE(at::equal(one.param, init));
}

TEST_CASE("cpu_adamw_step's grad_scale unscales loss-scaled gradients", "[optim]") {
  at::manual_seed(7);
  const std::int64_t n = 4099;
  const at::Tensor init = at::randn({n});
  const double scale = 65536.0;  // a power of two: unscaling is exact
  Adam unscaled(init), scaled(init), ignored(init);
  for (std::int64_t step = 1; step <= 10; ++step) {
    // Gradients near eps, where Adam is not scale invariant, so that a skipped unscale shows.
    const at::Tensor grad = at::randn({n}) * 1e-8;
    const CpuAdamWHyper hyper{.lr = 1e-2, .weight_decay = 0.01, .step = step};
    CpuAdamWHyper unscale = hyper;
    unscale.grad_scale = 1.0 / scale;
    cpu_adamw_step(unscaled.param, unscaled.exp_avg, unscaled.exp_avg_sq, grad, hyper);
    cpu_adamw_step(scaled.param, scaled.exp_avg, scaled.exp_avg_sq, grad * scale, unscale);
    cpu_adamw_step(ignored.param, ignored.exp_avg, ignored.exp_avg_sq, grad * scale, hyper);
  }
  CHECK(at::equal(scaled.param, unscaled.param));
  CHECK(at::equal(scaled.exp_avg_sq, unscaled.exp_avg_sq));
  CHECK(max_rel_diff(ignored.param, unscaled.param) > 1e-3);
  CHECK(max_rel_diff(unscaled.param, init) > 1e-2);
}

TEST_CASE("cpu_adamw_step's bf16/fp16 grads and param_out equal casts around the fp32 step", "[optim]") {
  at::manual_seed(8);
  const std::int64_t n = 10007;
  const at::Tensor init = spread(n, -9, 6);
  for (const auto grad_dtype : {at::kBFloat16, at::kHalf}) {
    for (const auto out_dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      INFO("grad " << grad_dtype << ", param_out " << out_dtype);
      Adam low(init), high(init);
      at::Tensor out = at::zeros({n}, out_dtype), out_high = at::zeros({n}, out_dtype);
      for (std::int64_t step = 1; step <= 3; ++step) {
        const at::Tensor grad = spread(n, -8, 2).to(grad_dtype);
        const CpuAdamWHyper hyper{.lr = 1e-2, .weight_decay = 0.01, .step = step, .grad_scale = 0.5};
        cpu_adamw_step(low.param, low.exp_avg, low.exp_avg_sq, grad, hyper, &out);
        cpu_adamw_step(high.param, high.exp_avg, high.exp_avg_sq, grad.to(at::kFloat), hyper, &out_high);
      }
      CHECK(at::equal(low.param, high.param));
      CHECK(at::equal(low.exp_avg, high.exp_avg));
      CHECK(at::equal(low.exp_avg_sq, high.exp_avg_sq));
      CHECK(at::equal(out, high.param.to(out_dtype)));
      CHECK(at::equal(out, out_high));
      CHECK_FALSE(at::equal(out, init.to(out_dtype)));
    }
  }
}

TEST_CASE("cpu_adamw_step accepts any shapes with the same element count", "[optim]") {
  at::manual_seed(9);
  const at::Tensor init = at::randn({64, 48}), grad = at::randn({48, 64}).to(at::kBFloat16);
  Adam matrix(init), flat(init.reshape({-1}));
  at::Tensor out = at::empty({3072}, at::kHalf);
  cpu_adamw_step(matrix.param, matrix.exp_avg, matrix.exp_avg_sq, grad, CpuAdamWHyper{}, &out);
  cpu_adamw_step(flat.param, flat.exp_avg, flat.exp_avg_sq, grad.reshape({-1}), CpuAdamWHyper{});
  CHECK(matrix.param.sizes() == init.sizes());
  CHECK(at::equal(matrix.param.reshape({-1}), flat.param));
  CHECK(at::equal(out, flat.param.to(at::kHalf)));
}

TEST_CASE("cpu_adamw_step rejects bad tensors naming the argument and the fix", "[optim]") {
  using Catch::Contains;
  const std::int64_t n = 4096;
  const at::Tensor init = at::randn({n});
  Adam a(init);
  const at::Tensor grad = at::randn({n});
  auto step = [&](at::Tensor& p, at::Tensor& m, at::Tensor& v, const at::Tensor& g, at::Tensor* out = nullptr,
                  CpuAdamWHyper hyper = {}) {
    return error_of([&] { cpu_adamw_step(p, m, v, g, hyper, out); });
  };

  at::Tensor transposed = at::randn({64, 64}).t();
  CHECK_THAT(step(transposed, a.exp_avg, a.exp_avg_sq, grad),
             Contains("param (Float, cpu, 4096 elements, not contiguous) must be contiguous"));
  at::Tensor dbl = at::zeros({n}, at::kDouble);
  CHECK_THAT(step(a.param, dbl, a.exp_avg_sq, grad), Contains("exp_avg (Double, cpu, 4096 elements) must be float32"));
  CHECK_THAT(step(a.param, a.exp_avg, dbl, grad), Contains("exp_avg_sq (Double"));
  at::Tensor bf16_param = init.to(at::kBFloat16);
  CHECK_THAT(step(bf16_param, a.exp_avg, a.exp_avg_sq, grad),
             Contains("param (BFloat16") && Contains("must be float32;"));
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg_sq, at::ones({n}, at::kInt)),
             Contains("grad (Int") && Contains("must be float32, bfloat16 or float16"));
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg_sq, at::randn({n - 1})),
             Contains("grad has 4095 elements but param has 4096"));
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg_sq, at::randn({2 * n}).slice(0, 0, 2 * n, 2)),
             Contains("grad (Float, cpu, 4096 elements, not contiguous)") && Contains(".contiguous()"));
  at::Tensor meta = at::empty({n}, at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
  CHECK_THAT(step(a.param, meta, a.exp_avg_sq, grad),
             Contains("exp_avg (Float, meta, 4096 elements) must live on the CPU"));
  at::Tensor out_dbl = at::zeros({n}, at::kDouble), out_short = at::zeros({n / 2}, at::kHalf);
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg_sq, grad, &out_dbl), Contains("param_out (Double"));
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg_sq, grad, &out_short), Contains("param_out has 2048 elements"));
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg_sq, grad, &a.param), Contains("param and param_out share memory"));
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg, grad), Contains("exp_avg and exp_avg_sq share memory"));
  at::Tensor undefined;
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg_sq, undefined), Contains("grad is an undefined tensor"));
  CHECK_THAT(step(a.param, a.exp_avg, a.exp_avg_sq, grad, nullptr, CpuAdamWHyper{.step = 0}),
             Contains("hyper.step is 0"));
  // Nothing was written by the refused calls; a good call still works.
  CHECK(at::equal(a.param, init));
  CHECK(step(a.param, a.exp_avg, a.exp_avg_sq, grad) == "no tessera::Error");
  CHECK_FALSE(at::equal(a.param, init));
}
