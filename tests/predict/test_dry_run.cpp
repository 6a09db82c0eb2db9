// tests for predict/dry_run.hpp: a run predicted on the meta device against the same run measured on the CPU, the
// verdict's wording, the collectives a dry run counts, and a 7B model predicted without allocating it.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include "support.hpp"
#include "tessera/dist/shape_communicator.hpp"
#include "tessera/experiment.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/predict/dry_run.hpp"

using namespace tessera;
using testing::quiet;
using testing::small_run;

namespace {

using Fp32Exp = Experiment<models::Llama, Fp32>;
using CkptMixedExp = Experiment<models::Llama, Bf16Mixed, CheckpointEveryBlock>;

// The measured step-1 snapshot of `phase` with the most allocated, as the prediction picks it.
memory::MemorySnapshot measured(const std::vector<memory::MemorySnapshot>& snaps, memory::Phase phase) {
  memory::MemorySnapshot best;
  best.allocator.allocated = -1;
  for (const auto& s : snaps)
    if (s.step == 1 && s.phase == phase && s.allocator.allocated > best.allocator.allocated) best = s;
  return best;
}

template <class Exp>
void check_against_real(RunConfig cfg) {
  cfg.max_steps = 2;
  const predict::Prediction p = predict::dry_run<Trainer<Exp>>(cfg, 1);
  Trainer<Exp> real(cfg, quiet());
  memory::reset_peak(c10::Device(c10::kCPU));
  const std::int64_t base = memory::allocator_stats(c10::Device(c10::kCPU)).allocated;
  real.train_step(0);
  real.train_step(1);
  REQUIRE(p.phases.size() == 4);
  for (const memory::MemorySnapshot& predicted : p.phases) {
    const memory::MemorySnapshot m = measured(real.snapshots(), predicted.phase);
    INFO("phase " << memory::phase_label(predicted.phase));
    // What each owner holds is the same code on meta tensors: equal to the byte.
    CHECK(predicted.owned.params == m.owned.params);
    CHECK(predicted.owned.grads == m.owned.grads);
    CHECK(predicted.owned.optim == m.owned.optim);
    // Activations: what the family's program and autograd keep, within 2% of the CPU run.
    CHECK(static_cast<double>(predicted.acts) == Approx(static_cast<double>(m.acts)).epsilon(0.02).margin(4096));
  }
  const std::int64_t real_peak = memory::allocator_stats(c10::Device(c10::kCPU)).peak;
  CHECK(static_cast<double>(p.peak) == Approx(static_cast<double>(real_peak)).epsilon(0.05));
  CHECK(base > 0);
}

}  // namespace

TEST_CASE("a dry run predicts each owner's bytes exactly and the peak within 5% (fp32)", "[predict]") {
  check_against_real<Fp32Exp>(small_run(4, 2, 64));
}

TEST_CASE("a dry run predicts bf16-mixed with checkpointing as the CPU run measures it", "[predict]") {
  check_against_real<CkptMixedExp>(small_run(2, 1, 64));
}

TEST_CASE("a 7B model is predicted without allocating it", "[predict]") {
  RunConfig cfg = small_run(1, 1, 128);
  cfg.model = "open-llama-7b";
  const std::int64_t before = memory::allocator_stats(c10::Device(c10::kCPU)).allocated;
  memory::reset_peak(c10::Device(c10::kCPU));
  const predict::Prediction p = predict::dry_run<Trainer<Experiment<models::Llama, Bf16True>>>(cfg, 1);
  // Parameters, gradients and AdamW's two moments of 6.74e9 bf16 weights.
  std::int64_t n = 0;
  for (const ParamSpec& spec : models::Llama::parameters(models::llama_preset("open-llama-7b"))) n += spec.numel();
  REQUIRE(p.phases.size() == 4);
  CHECK(p.phases[3].owned.params == 2 * n);
  CHECK(p.phases[2].owned.grads == 2 * n);
  CHECK(p.phases[3].owned.optim == 4 * n);
  CHECK(p.device_peak() > 8 * n);
  // The host allocated next to nothing for it.
  CHECK(memory::allocator_stats(c10::Device(c10::kCPU)).peak - before < (256ll << 20));
  CHECK(predict::judge(p, 40ll << 30).fits == false);
  CHECK(predict::judge(p, 200ll << 30).fits);
}

TEST_CASE("a dry run of several ranks shards what the policy shards and counts its collectives", "[predict]") {
  RunConfig cfg = small_run(2, 1, 64);
  const auto one = predict::dry_run<Trainer<Experiment<models::Llama, FullShard>>>(cfg, 1);
  const auto four = predict::dry_run<Trainer<Experiment<models::Llama, FullShard>>>(cfg, 4);
  REQUIRE(one.phases.size() == 4);
  REQUIRE(four.phases.size() == 4);
  // FullShard over 4 ranks: a quarter of the (padded) parameters and optimizer state per rank.
  CHECK(static_cast<double>(four.phases[0].owned.params) ==
        Approx(static_cast<double>(one.phases[0].owned.params) / 4).epsilon(0.01));
  CHECK(static_cast<double>(four.phases[0].owned.optim) ==
        Approx(static_cast<double>(one.phases[0].owned.optim) / 4).epsilon(0.01));
  CHECK(one.comm.ring == 0.0);  // a group of one sends nothing
  // Each unit is gathered for forward and again for backward, and its gradients reduce-scattered once (fp32).
  CHECK(four.comm.all_gather >= one.phases[0].owned.params);
  CHECK(four.comm.all_gather <= 2 * one.phases[0].owned.params);
  CHECK(four.comm.reduce_scatter >= one.phases[0].owned.params);
  CHECK(four.comm.ring > 0.0);
}

TEST_CASE("the verdict names the interval and the tensor class that overflow", "[predict]") {
  predict::Prediction p;
  auto snap = [](std::int64_t step, memory::Phase phase, std::int64_t params, std::int64_t grads, std::int64_t optim,
                 std::int64_t acts, std::int64_t peak) {
    memory::OwnedBytes owned{params, grads, optim, 0, 0, 0};
    return memory::make_snapshot(step, 0, phase, 0, owned, {params + grads + optim + acts, peak, 0}, true);
  };
  const std::int64_t g = 1ll << 30;
  p.timeline = {snap(0, memory::Phase::before_forward, 10 * g, 0, 0, 0, 10 * g),
                snap(0, memory::Phase::after_forward, 10 * g, 0, 0, 20 * g, 30 * g),
                snap(0, memory::Phase::after_backward, 10 * g, 10 * g, 0, 0, 45 * g),
                snap(0, memory::Phase::after_optimizer_step, 10 * g, 0, 20 * g, 0, 55 * g)};
  p.peak = 55 * g;
  const predict::Verdict opt = predict::judge(p, 50 * g);
  CHECK_FALSE(opt.fits);
  CHECK_THAT(opt.text, Catch::StartsWith("DOES NOT FIT: in the optimizer step of step 0"));
  CHECK_THAT(opt.text, Catch::Contains("the optimizer state (+20.00 GiB)"));
  const predict::Verdict fwd = predict::judge(p, 25 * g);
  CHECK_THAT(fwd.text, Catch::Contains("in the forward pass of step 0"));
  CHECK_THAT(fwd.text, Catch::Contains("activations and buffers"));
  const predict::Verdict fits = predict::judge(p, 60 * g);
  CHECK(fits.fits);
  CHECK_THAT(fits.text, Catch::StartsWith("FITS: rank 0 peaks at 55.00 GiB of 60.00 GiB"));
}

TEST_CASE("ShapeCommunicator checks counts as a real group and adds up ring bytes", "[predict]") {
  auto bytes = std::make_shared<dist::CollectiveBytes>();
  dist::ShapeCommunicator c(1, 4, bytes);
  const auto meta = at::TensorOptions().device(c10::kMeta).dtype(at::kFloat);
  c.all_gather(at::empty({10}, meta), at::empty({40}, meta));
  c.reduce_scatter(at::empty({40}, meta), at::empty({10}, meta), dist::ReduceOp::avg);
  c.all_reduce(at::empty({10}, meta), dist::ReduceOp::sum);
  CHECK(bytes->all_gather == 160);
  CHECK(bytes->reduce_scatter == 160);
  CHECK(bytes->all_reduce == 40);
  CHECK(bytes->ops == 3);
  CHECK(bytes->ring == Approx(0.75 * 160 + 0.75 * 160 + 1.5 * 40));
  CHECK_THROWS_WITH(c.all_gather(at::empty({10}, meta), at::empty({30}, meta)),
                    Catch::Contains("all_gather: 30 elements is not 4 x 10"));
}

TEST_CASE("parse_bytes reads the memory keys' sizes", "[predict][config]") {
  CHECK(parse_bytes("80GiB") == 80ll << 30);
  CHECK(parse_bytes("40GB") == 40'000'000'000ll);
  CHECK(parse_bytes("512MiB") == 512ll << 20);
  CHECK(parse_bytes("1.5GiB") == 3ll << 29);
  CHECK(parse_bytes("100B") == 100);
  CHECK_FALSE(parse_bytes("80"));
  CHECK_FALSE(parse_bytes("GiB"));
  CHECK_FALSE(parse_bytes("80 GiB"));
  CHECK_FALSE(parse_bytes("0GiB"));
  CHECK_FALSE(parse_bytes("-1GiB"));
  CHECK_FALSE(parse_bytes("80gib"));
}

TEST_CASE("the dry run's attention for a CUDA target: the flash kernel's output in q's memory order", "[predict]") {
  predict::register_meta_kernels();
  const auto meta = at::TensorOptions().device(at::kMeta);
  // q as a family makes it, (B, L, H, D) memory seen as (B, H, L, D); and contiguous as (B, H, L, D).
  const at::Tensor strided = at::empty({2, 6, 4, 8}, meta.dtype(at::kBFloat16)).transpose(1, 2);
  const at::Tensor dense = at::empty({2, 4, 6, 8}, meta.dtype(at::kBFloat16));
  const auto attend = [](const at::Tensor& q) { return at::scaled_dot_product_attention(q, q, q, {}, 0.0, true); };
  {
    const DryRunScope scope(0, 1, 1, c10::DeviceType::CUDA);
    const at::Tensor from_strided = attend(strided), from_dense = attend(dense);
    CHECK(from_strided.sizes() == c10::IntArrayRef{2, 4, 6, 8});
    CHECK(from_strided.transpose(1, 2).is_contiguous());  // its (B, L, H * D) view is free
    CHECK(from_dense.is_contiguous());                    // that view is a copy, as on the GPU
    CHECK_FALSE(from_dense.transpose(1, 2).is_contiguous());
    // fp32 takes the memory-efficient kernel: (B, L, H, D) whatever q's order
    CHECK(attend(dense.to(at::kFloat)).transpose(1, 2).is_contiguous());
  }
  {
    const DryRunScope scope(0, 1, 1, c10::DeviceType::CPU);  // the CPU's flash kernel: (B, L, H, Ev) always
    CHECK(attend(dense).transpose(1, 2).is_contiguous());
  }
}
