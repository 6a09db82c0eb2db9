// tessera's AdamW against LibTorch's own torch::optim::AdamW.
#include <catch2/catch.hpp>
#include <torch/optim/adamw.h>

#include "support.hpp"
#include "tessera/optim/adamw.hpp"

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

TEST_CASE("AdamW's defaults are torch.optim.AdamW's", "[optim]") {
  STATIC_REQUIRE(StepHyper{}.beta1 == 0.9);
  STATIC_REQUIRE(StepHyper{}.beta2 == 0.999);
  STATIC_REQUIRE(AdamW::eps == 1e-8);
  STATIC_REQUIRE(AdamW::default_weight_decay == 0.01);
}

