// UnitEngine on a program of several inputs: a call reading two tensors gets a gradient for each, a frozen call
// runs without a graph and gets no gradient, checkpointing recomputes without changing anything. The reference is
// plain autograd on the same weights.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "support.hpp"
#include "tessera/dist/self_communicator.hpp"
#include "tessera/engine/unit_engine.hpp"

using namespace tessera;

namespace {

// Units: 0 = A (4, 4) "encoder", 1 = B (4, 4) "cross block", 2 = C (4, 4) frozen "vision tower".
// Program: e = tanh(x A^T)            call 0, unit 0, inputs {x}
//          f = tanh(z C^T)            call 1, unit 2 (frozen), inputs {z}: nothing to differentiate
//          y = tanh(e B^T) * f + e    call 2, unit 1, inputs {e, f}: gradient for e (from A), f needs none
//          loss = sum(y^2)
std::vector<ParamSpec> specs() {
  return {{"a.weight", {4, 4}, 0, ParamInit::normal, true},
          {"b.weight", {4, 4}, 1, ParamInit::normal, true},
          {"c.weight", {4, 4}, 2, ParamInit::normal, true}};
}

at::Tensor compute(std::size_t c, std::span<const at::Tensor> in, const std::vector<std::vector<at::Tensor>>& p) {
  if (c == 0) return at::tanh(at::linear(in[0], p[0][0]));
  if (c == 1) return at::tanh(at::linear(in[0], p[0][0]));
  return at::tanh(at::linear(in[0], p[0][0])) * in[1] + in[0];
}

UnitComms self_comms() {
  const auto self = dist::AnyCommunicator::of(dist::SelfCommunicator{});
  return UnitComms{self, self, self};
}

struct Reference {
  at::Tensor loss, ga, gb;
};

Reference reference(const ParamStore& store, const at::Tensor& x, const at::Tensor& z) {
  std::vector<at::Tensor> w;
  for (std::size_t u = 0; u < 3; ++u) w.push_back(store.unit_views(u, store.flat_param(u))[0].detach().clone().requires_grad_(u != 2));
  const at::Tensor e = at::tanh(at::linear(x, w[0]));
  const at::Tensor f = at::tanh(at::linear(z, w[2]));
  const at::Tensor loss = (at::tanh(at::linear(e, w[1])) * f + e).pow(2).sum();
  loss.backward();
  return {loss.detach(), w[0].grad(), w[1].grad()};
}

}  // namespace

TEST_CASE("UnitEngine: a two-input call gets both gradients, a frozen call builds no graph", "[engine][unit_engine]") {
  const bool checkpointed = GENERATE(false, true);
  ParamStore store(specs(), at::kFloat, c10::Device("cpu"));
  store.initialize(0.5, 7);
  UnitEngine engine(store, ShardPlan{}, self_comms(), {{{0}, false}, {{2}, false}, {{1}, checkpointed}}, compute,
                    {false, false, true});
  CHECK(engine.trainable(0));
  CHECK(engine.trainable(1));
  CHECK_FALSE(engine.trainable(2));

  const at::Tensor x = at::randn({3, 4}), z = at::randn({3, 4});
  const Reference ref = reference(store, x, z);

  engine.begin_micro(true);
  const at::Tensor e = engine.call(0, {x});
  const at::Tensor f = engine.call(1, {z});
  CHECK(e.requires_grad());
  CHECK_FALSE(f.requires_grad());  // frozen call on an input that needs no gradient: no graph at all
  const at::Tensor loss = engine.call(2, {e, f}).pow(2).sum();
  loss.backward();
  engine.finish_gradients();

  CHECK(testing::max_rel_diff(loss, ref.loss) < 1e-6);
  CHECK(testing::max_rel_diff(engine.grad_slice(0).narrow(0, 0, 16).view({4, 4}), ref.ga) < 1e-5);
  CHECK(testing::max_rel_diff(engine.grad_slice(1).narrow(0, 0, 16).view({4, 4}), ref.gb) < 1e-5);
  CHECK_FALSE(engine.grad_slice(2).defined());  // frozen: no gradient buffer
  CHECK(engine.num_buckets() >= 1);
  CHECK(engine.grad_bytes() == 2 * 16 * 4);  // units 0 and 1 only
  engine.release_grads();
}

TEST_CASE("UnitEngine: gradients flow back into a differentiable input of the program", "[engine][unit_engine]") {
  ParamStore store(specs(), at::kFloat, c10::Device("cpu"));
  store.initialize(0.5, 3);
  UnitEngine engine(store, ShardPlan{}, self_comms(), {{{0}, false}, {{2}, false}, {{1}, false}}, compute,
                    {false, false, true});
  // z requires grad: the frozen call now needs its graph (a trained projection feeding a frozen model).
  const at::Tensor x = at::randn({2, 4}), z = at::randn({2, 4}).requires_grad_(true);
  engine.begin_micro(true);
  const at::Tensor f = engine.call(1, {z});
  CHECK(f.requires_grad());
  const at::Tensor loss = engine.call(2, {engine.call(0, {x}), f}).sum();
  loss.backward();
  engine.finish_gradients();
  REQUIRE(z.grad().defined());

  const at::Tensor z2 = z.detach().clone().requires_grad_(true);
  std::vector<at::Tensor> w;
  for (std::size_t u = 0; u < 3; ++u) w.push_back(store.unit_views(u, store.flat_param(u))[0].detach());
  const at::Tensor e = at::tanh(at::linear(x, w[0]));
  (at::tanh(at::linear(e, w[1])) * at::tanh(at::linear(z2, w[2])) + e).sum().backward();
  CHECK(testing::max_rel_diff(z.grad(), z2.grad()) < 1e-6);
  CHECK_FALSE(engine.grad_slice(2).defined());
  engine.release_grads();
}

TEST_CASE("UnitEngine stage 3: units left out of the wrap are the root, gathered from first use to the end of "
          "backward", "[engine][unit_engine][wrap]") {
  // Units 0 and 2 (the "encoder" and the "vision tower", both trained here) form the root unless every unit is
  // wrapped; unit 1 is a block of its own. Without prefetch, the gathered bytes after each call are exactly what
  // the engine keeps: the root while it is held, nothing of a wrapped unit.
  struct Case {
    const char* name;
    std::vector<bool> wrapped;
    std::int64_t held;  // bytes gathered between calls of the forward
  };
  const std::int64_t unit = 16 * 4;
  const Case c = GENERATE_COPY(Case{"every unit wrapped (no root)", {}, 0},
                               Case{"root = units 0 and 2", {false, true, false}, 2 * unit},
                               Case{"nothing wrapped: the whole model is the root", {false, false, false}, 3 * unit});
  INFO(c.name);
  ParamStore store(specs(), at::kFloat, c10::Device("cpu"), ShardLayout{1, 0, true});
  store.initialize(0.5, 11);
  ShardPlan plan;
  plan.stage = 3;
  plan.prefetch = false;
  UnitEngine engine(store, plan, self_comms(), {{{0}, false}, {{2}, false}, {{1}, false}}, compute, {}, c.wrapped);
  CHECK(engine.root_units().size() == static_cast<std::size_t>(c.held / unit));

  const at::Tensor x = at::randn({3, 4}), z = at::randn({3, 4});
  engine.begin_micro(true);
  const at::Tensor e = engine.call(0, {x});
  CHECK(engine.gathered_bytes() == c.held);
  const at::Tensor f = engine.call(1, {z});
  CHECK(engine.gathered_bytes() == c.held);
  const at::Tensor loss = engine.call(2, {e, f}).pow(2).sum();
  CHECK(engine.gathered_bytes() == c.held);
  loss.backward();
  CHECK(engine.gathered_bytes() == 0);  // the root is freed with the forward's last backward
  engine.finish_gradients();

  // The same gradients whatever the wrap: unit 2 now trains, so compare all three with plain autograd.
  std::vector<at::Tensor> w;
  for (std::size_t u = 0; u < 3; ++u)
    w.push_back(store.unit_views(u, store.flat_param(u))[0].detach().clone().requires_grad_(true));
  const at::Tensor e2 = at::tanh(at::linear(x, w[0]));
  (at::tanh(at::linear(e2, w[1])) * at::tanh(at::linear(z, w[2])) + e2).pow(2).sum().backward();
  for (std::size_t u = 0; u < 3; ++u) {
    INFO("unit " << u);
    CHECK(testing::max_rel_diff(engine.grad_slice(u).narrow(0, 0, 16).view({4, 4}), w[u].grad()) < 1e-5);
  }
  engine.release_grads();
}
