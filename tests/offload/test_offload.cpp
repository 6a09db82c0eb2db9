// OffloadOptimizer and OffloadParams under 1, 2 and 4 ranks (run by tessera_sharding_tests under mpiexec):
// each equals the same experiment without offload on the same job within 1e-6 relative in fp32 (the fused CPU
// AdamW against the device AdamW, the gradient copies, the master copy-back), and the memory table moves the
// optimizer state (and, with OffloadParams, the parameters) from the device figures to the CPU ones.
#include "sharding/parity.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

template <class Exp>
using WithoutOffload = ExperimentSpec<typename Exp::model, typename Exp::sharding, typename Exp::precision,
                                      typename Exp::checkpointing, typename Exp::optimizer, NoOffload,
                                      typename Exp::adapter>;

// Exp and Exp without offload on this job: every step's loss and all final parameters within tol.
template <class Exp>
void check_offload_parity(const RunConfig& cfg, double tol, std::int64_t steps = 3) {
  INFO("ranks " << world_size() << ", batch_size " << cfg.batch_size << ", accumulate " << cfg.accumulate_grad_batches);
  const RunResult got = train<Exp>(cfg, steps);
  const RunResult want = train<WithoutOffload<Exp>>(cfg, steps);
  check_parity(got, want, tol);
  const RunResult initial = train<WithoutOffload<Exp>>(cfg, 0);
  for (std::size_t u = 0; u < want.params.size(); ++u) CHECK(rel_norm_diff(got.params[u], initial.params[u]) > 1e-4);
}

const memory::MemorySnapshot& find(const std::vector<memory::MemorySnapshot>& all, std::int64_t step,
                                   memory::Phase phase) {
  for (const auto& s : all)
    if (s.step == step && s.phase == phase) return s;
  FAIL("no snapshot of step " << step << " phase " << memory::phase_label(phase));
  return all.front();
}

}  // namespace

TEST_CASE("OffloadOptimizer with NoShard equals no offload (fp32, one process per rank)", "[offload]") {
  SoloScope solo;
  check_offload_parity<Experiment<models::Llama, OffloadOptimizer>>(micro_parity_run(), 1e-6);
  RunConfig sgd = micro_parity_run();
  sgd.lr = 0.05;  // plain SGD moves parameters by lr * g: a larger lr so that they move measurably
  check_offload_parity<Experiment<models::Llama, OffloadOptimizer, Sgd>>(sgd, 1e-6);
}

TEST_CASE("OffloadOptimizer with ShardGradOp equals no offload (fp32)", "[offload][zero2]") {
  check_offload_parity<Experiment<models::Llama, ShardGradOp, OffloadOptimizer>>(micro_parity_run(), 1e-6);
  check_offload_parity<Experiment<models::Llama, ShardGradOp, OffloadOptimizer>>(micro_parity_run(2, 2), 1e-6);
}

TEST_CASE("OffloadOptimizer with FullShard equals no offload (fp32, with checkpointing)", "[offload][fsdp]") {
  check_offload_parity<Experiment<models::Llama, FullShard, OffloadOptimizer>>(micro_parity_run(), 1e-6);
  check_offload_parity<Experiment<models::Llama, FullShard, OffloadOptimizer>>(micro_parity_run(2, 2), 1e-6);
  check_offload_parity<Experiment<models::Llama, FullShard, OffloadOptimizer, CheckpointEveryBlock>>(micro_parity_run(),
                                                                                                     1e-6);
}

TEST_CASE("OffloadParams with FullShard equals no offload (fp32)", "[offload][fsdp]") {
  check_offload_parity<Experiment<models::Llama, FullShard, OffloadParams>>(micro_parity_run(2, 2), 1e-6);
}

TEST_CASE("OffloadOptimizer with Adam8bit: the same 8-bit step on the host master", "[offload][adam8bit]") {
  // Adam8bit's step runs the same CPU loop on the host master as on the device store here (both fp32 on the
  // CPU), so the only difference offload can make is in the plumbing: equal to 1e-6.
  check_offload_parity<Experiment<models::Llama, ShardGradOp, Adam8bit, OffloadOptimizer>>(micro_parity_run(), 1e-6);
}

TEST_CASE("OffloadOptimizer with Ddp, Zero1 and HybridShard equals no offload (fp32)", "[offload]") {
  check_offload_parity<Experiment<models::Llama, Ddp, OffloadOptimizer>>(micro_parity_run(), 1e-6);
  check_offload_parity<Experiment<models::Llama, Zero1, OffloadOptimizer>>(micro_parity_run(), 1e-6);
  check_offload_parity<Experiment<models::Llama, HybridShard, OffloadOptimizer>>(micro_parity_run(), 1e-6);
}

TEST_CASE("OffloadOptimizer in fp16-mixed: loss scaling unscales the host copies and skips together",
          "[offload][fp16]") {
  // The device keeps fp16 parameters (the fp32 master is on the CPU), so the comparison is with fp16 rounding
  // of the parameters the forward sees: the losses agree to bf16/fp16 level, not 1e-6.
  RunConfig cfg = micro_parity_run();
  cfg.lr = 1e-3;
  const RunResult got = train<Experiment<models::Llama, ShardGradOp, Fp16Mixed, OffloadOptimizer>>(cfg, 3);
  const RunResult want = train<Experiment<models::Llama, ShardGradOp, Fp16Mixed>>(cfg, 3);
  REQUIRE(got.losses.size() == want.losses.size());
  for (std::size_t s = 0; s < got.losses.size(); ++s) CHECK(std::abs(got.losses[s] - want.losses[s]) < 2e-2);
}

TEST_CASE("OffloadOptimizer memory: no optimizer state on the device, AdamW's 8 bytes per parameter on the CPU",
          "[offload][memory]") {
  const RunConfig cfg = micro_parity_run();
  Trainer<Experiment<models::Llama, ShardGradOp, OffloadOptimizer>> t(cfg, quiet());
  t.train_step(0);
  t.train_step(1);
  std::int64_t slice_elems = 0;
  for (std::size_t u = 0; u < t.params().num_units(); ++u) slice_elems += t.params().shard_numel(u);
  for (const auto& s : t.snapshots()) {
    INFO("step " << s.step << " " << memory::phase_label(s.phase));
    CHECK(s.owned.optim == 0);
    CHECK(s.owned.params_cpu == 4 * slice_elems);  // the fp32 master of this rank's shard
    CHECK(s.owned.grads_cpu == 4 * slice_elems);   // the host gradient buffers (fp32 here)
    CHECK(s.owned.params == t.params().param_bytes());
  }
  CHECK(find(t.snapshots(), 0, memory::Phase::before_forward).owned.optim_cpu == 0);  // state appears at step 0's end
  CHECK(find(t.snapshots(), 0, memory::Phase::after_optimizer_step).owned.optim_cpu == 8 * slice_elems);
  CHECK(find(t.snapshots(), 1, memory::Phase::after_backward).owned.optim_cpu == 8 * slice_elems);
  const std::string line = memory::format_snapshot(find(t.snapshots(), 1, memory::Phase::after_backward));
  INFO(line);
  CHECK(line.find("Optim device 0.00 GiB | Optim CPU ") != std::string::npos);  // the seeds' Optim GPU / Optim CPU
  CHECK(line.find("Grads device ") != std::string::npos);
}

TEST_CASE("OffloadOptimizer under ZeRO-2/3 streams gradients: none kept on the device across micro-steps",
          "[offload][memory]") {
  // Every micro-step's reduced shard is added into the host buffer and freed (DeepSpeed's ZeRO-2/3 offload), so
  // no phase holds a gradient on the device, while the host buffer holds this rank's shard.
  const auto check = [](auto& t) {
    t.train_step(0);
    t.train_step(1);
    std::int64_t slice_elems = 0;
    for (std::size_t u = 0; u < t.params().num_units(); ++u) slice_elems += t.params().shard_numel(u);
    REQUIRE_FALSE(t.snapshots().empty());
    for (const auto& s : t.snapshots()) {
      INFO("step " << s.step << " " << memory::phase_label(s.phase));
      CHECK(s.owned.grads == 0);
      CHECK(s.owned.grads_cpu == 4 * slice_elems);
    }
  };
  RunConfig cfg = micro_parity_run(2, 2);
  cfg.memory_micro = MemoryMicro::all;  // the phases of the first micro-step too, where a kept shard would show
  Trainer<Experiment<models::Llama, ShardGradOp, OffloadOptimizer>> zero2(cfg, quiet());
  check(zero2);
  Trainer<Experiment<models::Llama, FullShard, OffloadOptimizer>> zero3(cfg, quiet());
  check(zero3);
  // HybridShard across groups averages the shards after backward: it keeps them on the device (not streamed).
  if (world_size() > 1) {
    cfg.shard_group_size = 1;
    Trainer<Experiment<models::Llama, HybridShard, OffloadOptimizer>> hybrid(cfg, quiet());
    hybrid.train_step(0);
    bool kept = false;
    for (const auto& s : hybrid.snapshots()) kept = kept || s.owned.grads > 0;
    CHECK(kept);
  }
}

TEST_CASE("OffloadParams memory: no parameters or optimizer state on the device", "[offload][fsdp][memory]") {
  const RunConfig cfg = micro_parity_run();
  Trainer<Experiment<models::Llama, FullShard, OffloadParams>> t(cfg, quiet());
  t.train_step(0);
  REQUIRE(t.params().device().is_cpu());
  REQUIRE(t.params().dtype() == at::kFloat);
  for (const auto& s : t.snapshots()) {
    CHECK(s.owned.params == 0);
    CHECK(s.owned.optim == 0);
    CHECK(s.owned.params_cpu == t.params().param_bytes());
  }
}
