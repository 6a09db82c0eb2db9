// The T5 family (models/t5.hpp) under the sharding policies at 1, 2 and 4 ranks: equal to the 1-rank NoShard run on
// world_size x the rows (parity.hpp), as the Llama, OPT and ViT tests of this folder check. T5 brings what the
// decoder-only families do not: an encoder and a decoder stack, a unit (shared) read by two calls, per-stack
// position-bias tables in the root that every block's call reads through its input, and decoder blocks whose calls
// take the encoder's output. Tiny preset: 3 + 3 T5Block blocks of width 256 (~6.8M parameters) on the synthetic copy
// task, 32 input and 16 label tokens per row; batch 2, 3 steps.
#include "parity.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {
// shared (4096 rows, drawn N(0, 1) as T5 draws it) moves only in the rows of the few hundred tokens a step sees:
// ~4.6e-5 relative after 3 steps at lr 1e-4, still above the 1e-5 the comparison allows (every other unit: > 1e-4).
constexpr double kMinMove = 2e-5;
}  // namespace

TEST_CASE("T5: Ddp, Zero1, ShardGradOp and FullShard equal the 1-rank run (fp32)", "[sharding][t5]") {
  const RunConfig cfg = parity_run();
  SECTION("Ddp") { check_against_reference<Experiment<models::T5, Ddp>>(cfg, 1e-5, 3, kMinMove); }
  SECTION("Zero1") { check_against_reference<Experiment<models::T5, Zero1>>(cfg, 1e-5, 3, kMinMove); }
  SECTION("ShardGradOp") { check_against_reference<Experiment<models::T5, ShardGradOp>>(cfg, 1e-5, 3, kMinMove); }
  SECTION("FullShard, T5Block wrapped") { check_against_reference<Experiment<models::T5, FullShard>>(cfg, 1e-5, 3, kMinMove); }
}

TEST_CASE("T5: FullShard with accumulation, checkpointed T5Block blocks and shared wrapped on its own",
          "[sharding][t5][checkpoint]") {
  RunConfig cfg = parity_run(2, 2);
  cfg.checkpoint_blocks = "T5Block";
  cfg.wrap_blocks = "T5Block,shared";  // shared: one FSDP unit read by both stacks' embedding calls
  check_against_reference<Experiment<models::T5, FullShard, CheckpointEveryBlock>>(cfg, 1e-5, 3, kMinMove);
}
