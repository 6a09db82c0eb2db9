// The BLIP-2 families (models/blip2.hpp) under the sharding policies at 1, 2 and 4 ranks: equal to the 1-rank NoShard
// run on world_size x the rows (parity.hpp), as the other families' tests of this folder check. BLIP-2 brings three
// block types in one program (Blip2EncoderLayer, Blip2QFormerLayer and the LM's OPTDecoderLayer or T5Block, each an
// FSDP unit under FullShard), a call that reads two root units (the queries: qformer.layernorm and query_tokens),
// Q-Former calls that take the image features as a second input, the LM behind a prefix of projected queries, and
// freeze= (frozen units: no gradient, no optimizer state, no reduction). Tiny presets: a 2-layer vision model on
// 32x32 images, a 2-layer Q-Former with 8 queries, and the tiny OPT (4 blocks) or T5 (3 + 3 blocks) on synthetic
// captions of 16 to 32 tokens; batch 2, 3 steps.
#include "parity.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {
// T5's shared (4096 rows drawn N(0, 1)) moves only in the rows of the tokens a step sees (see test_t5.cpp).
constexpr double kMinMoveT5 = 2e-5;
}  // namespace

// Rounding: with the caption-only loss (caption_targets=caption, the default; the processor's targets add constant
// image-token targets) 4 ranks' summation order left unit 8 1.05e-5 (relative norm) from the 1-rank run after 3
// AdamW steps; a sharding error is orders of magnitude larger.
constexpr double kTolOpt = 2e-5;
TEST_CASE("BLIP-2 OPT: Ddp, ShardGradOp and FullShard equal the 1-rank run (fp32)", "[sharding][blip2]") {
  const RunConfig cfg = parity_run();
  SECTION("Ddp") { check_against_reference<Experiment<models::Blip2Opt, Ddp>>(cfg, kTolOpt); }
  SECTION("ShardGradOp") { check_against_reference<Experiment<models::Blip2Opt, ShardGradOp>>(cfg, kTolOpt); }
  SECTION("FullShard, the three block types wrapped") {
    check_against_reference<Experiment<models::Blip2Opt, FullShard>>(cfg, kTolOpt);
  }
}

TEST_CASE("BLIP-2 T5: Zero1, and FullShard with accumulation and checkpointed blocks of all three types",
          "[sharding][blip2][checkpoint]") {
  SECTION("Zero1") { check_against_reference<Experiment<models::Blip2T5, Zero1>>(parity_run(), 1e-5, 3, kMinMoveT5); }
  SECTION("FullShard + CheckpointEveryBlock") {
    RunConfig cfg = parity_run(2, 2);
    cfg.checkpoint_blocks = "Blip2EncoderLayer,Blip2QFormerLayer,T5Block";
    check_against_reference<Experiment<models::Blip2T5, FullShard, CheckpointEveryBlock>>(cfg, 1e-5, 3, kMinMoveT5);
  }
}

TEST_CASE("BLIP-2 OPT: freeze=vision_model,language_model under FullShard trains the Q-Former alone, as one rank does",
          "[sharding][blip2][freeze]") {
  using Exp = Experiment<models::Blip2Opt, FullShard>;
  RunConfig cfg = parity_run();
  cfg.freeze = "vision_model,language_model";
  const RunResult got = train<Exp>(cfg, 3);
  const RunResult want = reference<Exp>(cfg, 3);
  check_parity(got, want, 1e-5);
  const RunResult initial = reference<Exp>(cfg, 0);
  const auto units = models::Blip2Opt::units(models::Blip2Opt::preset("tiny"));
  REQUIRE(units.size() == got.params.size());
  std::size_t frozen = 0, trained = 0;
  for (std::size_t u = 0; u < units.size(); ++u) {
    INFO("unit " << u << " " << units[u].module);
    const bool is_frozen = units[u].module.rfind("vision_model", 0) == 0 || units[u].module.rfind("language_model", 0) == 0;
    if (is_frozen) {
      CHECK(at::equal(got.params[u], initial.params[u]));  // never updated, on any rank
      ++frozen;
    } else {
      CHECK(rel_norm_diff(got.params[u], initial.params[u]) > 1e-4);
      ++trained;
    }
  }
  CHECK(frozen == 4 + 6);  // vision: embeddings, 2 layers, post_layernorm; OPT: embeddings, 4 blocks, head
  CHECK(trained == 5);     // query_tokens, qformer.layernorm, 2 Q-Former layers, language_projection
}
