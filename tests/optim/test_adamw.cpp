// tessera's AdamW against LibTorch's own torch::optim::AdamW.
#include <catch2/catch.hpp>
#include <torch/optim/adamw.h>

#include "support.hpp"
#include "tessera/optim/adamw.hpp"
#include "tessera/optim/fused_adamw.hpp"

using namespace tessera;
using testing::max_rel_diff;

TEST_CASE("AdamW equals torch::optim::AdamW over 100 steps (fp32)", "[optim]") {
  at::manual_seed(3);
  const at::Tensor init = at::randn({4099});
  at::Tensor ours = init.clone();
  at::Tensor theirs = init.clone().requires_grad_(true);
  torch::optim::AdamW reference({theirs}, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
  AdamW::State state = AdamW::init(ours, at::kFloat);
  for (int step = 0; step < 100; ++step) {
    const at::Tensor grad = at::randn({4099}) * (1.0 + step % 7);
    AdamW::step(state, ours, grad, StepHyper{1e-2, 0.01});
    theirs.mutable_grad() = grad.clone();
    reference.step();
  }
  CHECK(max_rel_diff(ours, theirs) < 1e-6);
  CHECK(max_rel_diff(ours, init) > 1e-2);
  CHECK(AdamW::state_bytes(state) == 2 * 4099 * 4);
}

TEST_CASE("AdamW with litgpt's betas (0.9, 0.95) equals torch::optim::AdamW, on the GPU-style and fused CPU paths",
          "[optim]") {
  at::manual_seed(5);
  const at::Tensor init = at::randn({1031});
  torch::Tensor theirs = init.clone().requires_grad_(true);
  torch::optim::AdamW reference({theirs}, torch::optim::AdamWOptions(2e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  at::Tensor fused = init.clone();                   // fp32 CPU: the fused kernel
  at::Tensor ops = init.clone().to(at::kDouble);     // double: the ATen ops path
  AdamW::State fused_state = AdamW::init(fused, at::kFloat);
  AdamW::State ops_state = AdamW::init(ops, at::kDouble);
  const StepHyper hyper{2e-3, 0.1, 0.9, 0.95};
  at::Tensor default_betas = init.clone();
  AdamW::State default_state = AdamW::init(default_betas, at::kFloat);
  for (int step = 0; step < 20; ++step) {
    const at::Tensor grad = at::randn({1031}) * (1.0 + step % 5);
    AdamW::step(fused_state, fused, grad, hyper);
    AdamW::step(ops_state, ops, grad.to(at::kDouble), hyper);
    AdamW::step(default_state, default_betas, grad, StepHyper{2e-3, 0.1});
    theirs.mutable_grad() = grad.clone();
    reference.step();
  }
  CHECK(max_rel_diff(fused, theirs) < 1e-5);
  CHECK(max_rel_diff(ops.to(at::kFloat), theirs) < 1e-5);
  CHECK(max_rel_diff(default_betas, theirs) > 1e-4);  // the betas are used: 0.999 gives another result (3.6e-4 here)
}

TEST_CASE("AdamW through ATen's fused kernel (CUDA's path) equals torch::optim::AdamW; in bf16 it rounds once",
          "[optim]") {
  at::manual_seed(11);
  const at::Tensor init = at::randn({2053});
  at::Tensor ours = init.clone();
  at::Tensor theirs = init.clone().requires_grad_(true);
  torch::optim::AdamW reference({theirs}, torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  AdamW::State state = AdamW::init(ours, at::kFloat);
  // bf16 parameters and state, as bf16-true keeps them: the fused kernel's fp32 arithmetic, each value rounded once
  at::Tensor low = init.to(at::kBFloat16);
  AdamW::State low_state = AdamW::init(low, at::kBFloat16);
  at::Tensor wide = init.to(at::kBFloat16).to(at::kDouble);  // the same start, every step in double then rounded
  AdamW::State wide_state = AdamW::init(wide, at::kDouble);
  const StepHyper hyper{3e-3, 0.1, 0.9, 0.95};
  for (int step = 0; step < 30; ++step) {
    const at::Tensor grad = at::randn({2053}) * (1.0 + step % 3);
    optim::fused_adamw_step(state, ours, grad, hyper);
    theirs.mutable_grad() = grad.clone();
    reference.step();
    const at::Tensor grad16 = grad.to(at::kBFloat16);
    optim::fused_adamw_step(low_state, low, grad16, hyper);
    AdamW::step(wide_state, wide, grad16.to(at::kDouble), hyper);
    wide = wide.to(at::kBFloat16).to(at::kDouble);  // bf16 storage between steps, as the fused kernel's
    for (at::Tensor* t : {&wide_state.exp_avg, &wide_state.exp_avg_sq}) *t = t->to(at::kBFloat16).to(at::kDouble);
  }
  CHECK(state.steps == 30);
  CHECK(max_rel_diff(ours, theirs) < 1e-6);
  CHECK(max_rel_diff(ours, init) > 1e-2);
  // bf16's unit roundoff is 2^-8 = 3.9e-3: a few roundings apart at most
  CHECK(max_rel_diff(low.to(at::kFloat), wide.to(at::kFloat)) < 2e-2);
  CHECK(max_rel_diff(low.to(at::kFloat), theirs.detach()) < 3e-2);
}

TEST_CASE("AdamW's defaults are torch.optim.AdamW's", "[optim]") {
  STATIC_REQUIRE(StepHyper{}.beta1 == 0.9);
  STATIC_REQUIRE(StepHyper{}.beta2 == 0.999);
  STATIC_REQUIRE(AdamW::eps == 1e-8);
  STATIC_REQUIRE(AdamW::default_weight_decay == 0.01);
}


// Hidden ([.cuda]): needs a CUDA device; bench/gpu/run.sh runs it by its tag. AdamW::step on CUDA in bf16 (bf16-true's
// dtypes) is the fused kernel: the same steps as the kernel on the CPU, to bf16's rounding.
TEST_CASE("AdamW on CUDA takes ATen's fused kernel and agrees with it on the CPU", "[.cuda][optim]") {
  REQUIRE(at::hasCUDA());
  at::manual_seed(13);
  const at::Tensor init = at::randn({1 << 16}).to(at::kBFloat16);
  at::Tensor gpu = init.to(at::kCUDA);
  at::Tensor cpu = init.clone();
  AdamW::State gpu_state = AdamW::init(gpu, at::kBFloat16);
  AdamW::State cpu_state = AdamW::init(cpu, at::kBFloat16);
  const StepHyper hyper{1e-3, 0.01, 0.9, 0.95};
  for (int step = 0; step < 10; ++step) {
    const at::Tensor grad = (at::randn({1 << 16}) * (1.0 + step % 4)).to(at::kBFloat16);
    AdamW::step(gpu_state, gpu, grad.to(at::kCUDA), hyper);
    optim::fused_adamw_step(cpu_state, cpu, grad, hyper);
  }
  CHECK(gpu_state.steps == 10);
  CHECK(max_rel_diff(gpu.cpu().to(at::kFloat), cpu.to(at::kFloat)) < 1e-2);
  CHECK(max_rel_diff(gpu_state.exp_avg_sq.cpu().to(at::kFloat), cpu_state.exp_avg_sq.to(at::kFloat)) < 1e-2);
  CHECK(max_rel_diff(gpu.cpu().to(at::kFloat), init.to(at::kFloat)) > 1e-3);
}
