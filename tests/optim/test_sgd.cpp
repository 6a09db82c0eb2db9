// tessera's SGD against LibTorch's own torch::optim::SGD.
#include <catch2/catch.hpp>
#include <torch/optim/sgd.h>

#include "support.hpp"
#include "tessera/optim/sgd.hpp"

using namespace tessera;
using testing::max_rel_diff;

TEST_CASE("SGD's defaults are torch.optim.SGD's", "[optim]") {
  STATIC_REQUIRE(Sgd::default_weight_decay == 0.0);
}

TEST_CASE("SGD equals torch::optim::SGD and keeps no state", "[optim]") {
  at::manual_seed(5);
  const at::Tensor init = at::randn({300});
  at::Tensor ours = init.clone();
  at::Tensor theirs = init.clone().requires_grad_(true);
  torch::optim::SGD reference({theirs}, torch::optim::SGDOptions(0.1).weight_decay(0.05));
  Sgd::State state = Sgd::init(ours, at::kFloat);
  for (int step = 0; step < 20; ++step) {
    const at::Tensor grad = at::randn({300});
    Sgd::step(state, ours, grad, StepHyper{0.1, 0.05});
    theirs.mutable_grad() = grad.clone();
    reference.step();
  }
  CHECK(max_rel_diff(ours, theirs) < 1e-6);
  CHECK(Sgd::state_bytes(state) == 0);
}
