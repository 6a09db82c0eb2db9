// The OPT family (models/opt.hpp) under every sharding policy at 1, 2 and 4 ranks: equal to the 1-rank NoShard
// run on world_size x the rows (parity.hpp), as the Llama tests of this folder check for Llama. OPT brings what
// Llama's tiny preset lacks: the lm_head tied to embed_tokens (the head call reads the embedding unit, so a
// sharded run must gather unit 0 for the head and reduce its gradient from two calls), learned positions, biases
// and LayerNorm, and the padding row of embed_tokens that gets no gradient from the lookup.
// Tiny preset: 4 pre-LN blocks of width 256, vocab 4096 (~4.5M parameters); batch 2, seq 32, 3 steps.
#include "parity.hpp"

using namespace tessera;
using namespace tessera::testing;

// 4 ranks against 1 in fp32 after 3 AdamW steps: below 1e-5 (relative norm) on AVX-512 kernels, up to 1.77e-5
// (unit 0, the embedding the head shares) on AVX2 kernels (ATEN_CPU_CAPABILITY=avx2), whose sums round in another
// order. A sharding error is orders of magnitude larger.
constexpr double kTol = 3e-5;

TEST_CASE("Opt: Ddp, Zero1, ShardGradOp and FullShard equal the 1-rank run (fp32)", "[sharding][opt]") {
  const RunConfig cfg = parity_run();
  SECTION("Ddp") { check_against_reference<Experiment<models::Opt, Ddp>>(cfg, kTol); }
  SECTION("Zero1") { check_against_reference<Experiment<models::Opt, Zero1>>(cfg, kTol); }
  SECTION("ShardGradOp") { check_against_reference<Experiment<models::Opt, ShardGradOp>>(cfg, kTol); }
  SECTION("FullShard: the tied head gathers the embedding unit") {
    check_against_reference<Experiment<models::Opt, FullShard>>(cfg, kTol);
  }
}

TEST_CASE("Opt: HybridShard equals the 1-rank run (fp32)", "[sharding][opt][hsdp]") {
  // Groups of 2 at 4 ranks (gradients cross groups), one group at 2 ranks, a group of one at 1.
  RunConfig cfg = parity_run();
  cfg.shard_group_size = std::min(2, world_size());
  check_against_reference<Experiment<models::Opt, HybridShard>>(cfg, kTol);
}

TEST_CASE("Opt: FullShard with every block checkpointed", "[sharding][opt][checkpoint]") {
  check_against_reference<Experiment<models::Opt, FullShard, CheckpointEveryBlock>>(parity_run(), kTol);
}

TEST_CASE("Opt: FullShard in bf16-mixed", "[sharding][opt][bf16]") {
  // Tolerance as for Llama in bf16-mixed (test_full_shard.cpp): bf16 roundings of activations differ by one ulp
  // between GEMMs of B and of W*B rows.
  check_against_reference<Experiment<models::Opt, FullShard, Bf16Mixed>>(parity_run(), 2e-3);
}

TEST_CASE("Opt: ShardGradOp with OffloadOptimizer equals the 1-rank run", "[sharding][opt][offload]") {
  // The reference drops the offload too (parity.hpp), so this checks the host AdamW and the copies as well.
  check_against_reference<Experiment<models::Opt, ShardGradOp, OffloadOptimizer>>(parity_run(), kTol);
}

TEST_CASE("Opt: Ddp with Lora on q_proj, v_proj", "[sharding][opt][lora]") {
  // Dropout off and the tolerance as for Llama's Lora case (test_ddp.cpp): B starts at 0, so AdamW's first updates
  // of B are ~lr*sign(g) and the ranks' summation order of B's small gradients shows in the adapter unit.
  RunConfig cfg = parity_run();
  cfg.lora_dropout = 0.0;
  cfg.lr = 1e-3;
  check_against_reference<Experiment<models::Opt, Ddp, Lora>>(cfg, 5e-5);
}

TEST_CASE("Opt: FullShard without auto-wrap, OPTDecoderLayer blocks checkpointed by type", "[sharding][opt][wrap]") {
  // wrap_blocks=none: the whole model is one root unit, gathered once per step; checkpoint_blocks names the
  // family's block type (the seeds' act_ckpt on an OPT language model).
  RunConfig cfg = parity_run();
  cfg.wrap_blocks = "none";
  cfg.checkpoint_blocks = "OPTDecoderLayer";
  check_against_reference<Experiment<models::Opt, FullShard, CheckpointEveryBlock>>(cfg, kTol);
}
