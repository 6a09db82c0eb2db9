// tests for ops/loss.hpp's linear_cross_entropy: the blocked form against the whole (op-by-op) form, loss and
// gradients (fp32 to the order of summation, bf16 to its rounding, the widened products included; the smallest
// blocks, an eighth of the vocabulary, one block, a last partial block), ignored rows, a frozen head, every row ignored, labels outside
// the vocabulary, and what each form holds after forward and at its peak in backward (counting meta device); then
// the language families trained with loss_blocks=on and off. The whole form is the families' op-by-op head, checked
// against transformers by tests/reference.
// LibTorch before Catch2: glog's CHECK (pulled in by c10) must not replace Catch2's when built without the PCH.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/memory/counting_meta_allocator.hpp"
#include "tessera/ops/gemm.hpp"
#include "tessera/ops/loss.hpp"
#include "tessera/predict/dry_run.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace tessera;
using ops::Gemm;
using ops::Lowp;

namespace {

double relative_gap(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a64 = a.detach().to(at::kDouble), b64 = b.detach().to(at::kDouble);
  return ((a64 - b64).abs().max() / b64.abs().max().clamp_min(1e-30)).item<double>();
}

struct Result {
  at::Tensor loss, dx, dw;
};

// The loss of `gemm` on copies of x and w, and their gradients for the loss scaled by 1.7.
Result run(const Gemm& gemm, const at::Tensor& x, const at::Tensor& w, const at::Tensor& targets, bool train_w) {
  const at::Tensor xa = x.detach().clone().requires_grad_(true), wa = w.detach().clone().requires_grad_(train_w);
  const at::Tensor loss = ops::linear_cross_entropy(gemm, xa, wa, targets);
  (loss * 1.7).backward();
  return {loss.detach(), xa.grad(), wa.grad()};
}

// Both forms on the same inputs: the same loss and gradients within `tol`.
void check_same(Lowp lowp, c10::ScalarType t, std::int64_t block_bytes, bool train_w = true) {
  const std::int64_t vocab = 1001, hidden = 32;
  const at::Tensor x = at::randn({3, 7, hidden}).to(t), w = (at::randn({vocab, hidden}) * 0.3).to(t);
  at::Tensor targets = at::randint(0, vocab, {3, 7}, at::kLong);
  targets.index_put_({0, at::indexing::Slice(0, 4)}, -100);  // ignored rows, as a prompt's or padding's labels
  targets.index_put_({1, 2}, vocab - 1);                      // the last block's last row
  const Result whole = run(Gemm{lowp, 0}, x, w, targets, train_w);
  const Result blocked = run(Gemm{lowp, block_bytes}, x, w, targets, train_w);
  const double tol = t == at::kFloat ? 1e-5 : 4e-3;
  CHECK(blocked.loss.scalar_type() == at::kFloat);
  CHECK(relative_gap(blocked.loss, whole.loss) <= tol);
  REQUIRE(blocked.dx.defined());
  CHECK(blocked.dx.scalar_type() == t);
  CHECK(relative_gap(blocked.dx, whole.dx) <= tol);
  // Ignored rows get no gradient in either form.
  CHECK(blocked.dx[0].narrow(0, 0, 4).abs().max().item<double>() == 0.0);
  if (!train_w) {
    CHECK_FALSE(blocked.dw.defined());
    return;
  }
  REQUIRE(blocked.dw.defined());
  CHECK(relative_gap(blocked.dw, whole.dw) <= tol);
}

}  // namespace

TEST_CASE("the blocked loss is the whole loss, forward and backward", "[ops][loss]") {
  at::manual_seed(3);
  // 1 byte asks for the smallest block, an eighth of the vocabulary: 8 blocks of 1001 rows (126), the last partial.
  SECTION("fp32, the smallest blocks") { check_same(Lowp::native, at::kFloat, 1); }
  SECTION("fp32, one block") { check_same(Lowp::native, at::kFloat, ops::kLossBlockBytes); }
  SECTION("fp32, frozen head: x gets its gradient, the weight none") {
    check_same(Lowp::native, at::kFloat, 1, /*train_w=*/false);
  }
  SECTION("bf16") { check_same(Lowp::native, at::kBFloat16, 1); }
  SECTION("bf16 through the widened products") { check_same(Lowp::widen, at::kBFloat16, 1); }
}

TEST_CASE("the blocked loss of rows that are all ignored is NaN, as the whole one", "[ops][loss]") {
  const at::Tensor x = at::randn({4, 8}), w = at::randn({100, 8}), t = at::full({4}, -100, at::kLong);
  CHECK(std::isnan(ops::linear_cross_entropy(Gemm{Lowp::native, 0}, x, w, t).item<double>()));
  CHECK(std::isnan(ops::linear_cross_entropy(Gemm{Lowp::native, 1}, x, w, t).item<double>()));
}

TEST_CASE("a label outside the vocabulary is refused with its value, in both forms", "[ops][loss]") {
  const at::Tensor x = at::randn({2, 3, 8}), w = at::randn({100, 8});
  at::Tensor t = at::zeros({2, 3}, at::kLong);
  t.index_put_({1, 1}, 100);
  for (const std::int64_t block : {std::int64_t{0}, std::int64_t{1}})
    CHECK_THROWS_WITH(ops::linear_cross_entropy(Gemm{Lowp::native, block}, x, w, t),
                      Catch::Contains("target 100 is outside the vocabulary [0, 100)") &&
                          Catch::Contains("or -100 (ignored)"));
  CHECK_THROWS_WITH(ops::linear_cross_entropy(Gemm{}, x, w, at::zeros({5}, at::kLong)),
                    Catch::Contains("5 targets for 6 rows"));
  CHECK_THROWS_WITH(ops::linear_cross_entropy(Gemm{}, x, at::randn({100, 9}), t), Catch::Contains("do not multiply"));
}

TEST_CASE("the blocked loss keeps no logits after forward and holds a few blocks in backward", "[ops][loss]") {
  memory::install_counting_meta_allocator();
  predict::register_meta_kernels();
  const c10::Device meta(c10::DeviceType::Meta);
  const auto opts = at::TensorOptions().device(meta).dtype(at::kBFloat16);
  const std::int64_t rows = 4 * 256, hidden = 256, vocab = 32000;
  const std::int64_t logits32 = rows * vocab * 4;  // one fp32 (rows, V) tensor: 125 MiB
  const at::Tensor targets = at::zeros({4, 256}, at::TensorOptions().device(meta).dtype(at::kLong));
  struct Held {
    std::int64_t after_forward, backward_peak;
  };
  const auto measure = [&](std::int64_t block_bytes) {
    const at::Tensor x = at::empty({4, 256, hidden}, opts).requires_grad_(true);
    const at::Tensor w = at::empty({vocab, hidden}, opts).requires_grad_(true);
    const std::int64_t before = memory::allocator_stats(meta).allocated;
    at::Tensor loss = ops::linear_cross_entropy(Gemm{Lowp::native, block_bytes}, x, w, targets);
    const std::int64_t after = memory::allocator_stats(meta).allocated;
    memory::reset_meta_peak();
    loss.backward();
    loss.reset();
    const Held held{after - before, memory::allocator_stats(meta).peak - after};
    CHECK(x.grad().sizes() == x.sizes());
    CHECK(w.grad().sizes() == w.sizes());
    return held;
  };
  const Held whole = measure(0), blocked = measure(ops::kLossBlockBytes), smallest = measure(1);
  INFO("whole: " << whole.after_forward << " after forward, +" << whole.backward_peak << " in backward; blocked: "
                 << blocked.after_forward << ", +" << blocked.backward_peak);
  CHECK(whole.after_forward >= logits32);        // the fp32 log-probabilities
  CHECK(blocked.after_forward < rows * 64);      // per row: the log-sum-exp, the target, whether it is kept
  CHECK(whole.backward_peak >= 2 * logits32);    // two more (rows, V) fp32 tensors at once
  CHECK(blocked.backward_peak < logits32);       // a few blocks of 32 MiB of fp32 logits, the gradients of x and W
  CHECK(smallest.backward_peak >= logits32 / 8);  // at most 8 blocks, whatever the bytes asked: an eighth each
}

namespace {

// Steps 0..2 of the family's tiny preset (fp32, synthetic data) with loss_blocks=on and off: the losses.
template <class Family>
std::pair<std::vector<double>, std::vector<double>> losses_both_ways() {
  std::pair<std::vector<double>, std::vector<double>> out;
  for (const LossBlocks blocks : {LossBlocks::on, LossBlocks::off}) {
    RunConfig cfg = testing::small_run(2, 1, 16);
    cfg.loss_blocks = blocks;
    Trainer<Experiment<Family, Fp32>> t(cfg, testing::quiet());
    for (std::int64_t s = 0; s < 3; ++s)
      (blocks == LossBlocks::on ? out.first : out.second).push_back(t.train_step(s).loss);
  }
  return out;
}

}  // namespace

TEST_CASE("Llama, OPT and T5 train alike with the loss in blocks and whole (loss_blocks)", "[ops][loss]") {
  const auto check = [](const auto& both, const char* family) {
    INFO(family << ": blocked vs whole " << testing::max_rel_gap(both.first, both.second));
    REQUIRE(both.first.size() == 3);
    CHECK(testing::max_rel_gap(both.first, both.second) < 1e-5);
  };
  check(losses_both_ways<models::Llama>(), "Llama");
  check(losses_both_ways<models::Opt>(), "OPT");
  check(losses_both_ways<models::T5>(), "T5");
}
