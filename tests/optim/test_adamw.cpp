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

TEST_CASE("AdamW's defaults are torch.optim.AdamW's", "[optim]") {
  STATIC_REQUIRE(AdamW::beta1 == 0.9);
  STATIC_REQUIRE(AdamW::beta2 == 0.999);
  STATIC_REQUIRE(AdamW::eps == 1e-8);
  STATIC_REQUIRE(AdamW::default_weight_decay == 0.01);
}

