// The ViT family (models/vit.hpp) under the sharding policies at 1, 2 and 4 ranks: equal to the 1-rank NoShard run
// on world_size x the images (parity.hpp), as the Llama and OPT tests of this folder check. ViT brings an image
// batch (pixels and class ids read in RowOrder's rank-independent order), a convolution in the embedding unit and a
// loss over whole images rather than positions. Tiny preset: 4 ViTLayer blocks of width 256 on 32x32 synthetic
// images (65 positions), 10 classes (~3.2M parameters); batch 2, 3 steps.
#include "parity.hpp"

using namespace tessera;
using namespace tessera::testing;

TEST_CASE("Vit: Ddp, Zero1, ShardGradOp and FullShard equal the 1-rank run (fp32)", "[sharding][vit]") {
  const RunConfig cfg = parity_run();
  SECTION("Ddp (seed 004's first run)") { check_against_reference<Experiment<models::Vit, Ddp>>(cfg, 1e-5); }
  SECTION("Zero1 (seed 004's DeepSpeed stage 1)") { check_against_reference<Experiment<models::Vit, Zero1>>(cfg, 1e-5); }
  SECTION("ShardGradOp") { check_against_reference<Experiment<models::Vit, ShardGradOp>>(cfg, 1e-5); }
  SECTION("FullShard, ViTLayer wrapped") { check_against_reference<Experiment<models::Vit, FullShard>>(cfg, 1e-5); }
}

TEST_CASE("Vit: FullShard with accumulation and checkpointed ViTLayer blocks", "[sharding][vit][checkpoint]") {
  RunConfig cfg = parity_run(2, 2);
  cfg.checkpoint_blocks = "ViTLayer";
  check_against_reference<Experiment<models::Vit, FullShard, CheckpointEveryBlock>>(cfg, 1e-5);
}
