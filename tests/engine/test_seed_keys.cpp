// tests: the seeds' keys for what a binary fixes (engine/seed_keys.hpp): the values each experiment type shows and
// accepts, and the refusal of any other.
#include <catch2/catch.hpp>

#include <string_view>
#include <vector>

#include "tessera/tessera.hpp"
#include "tessera/engine/seed_keys.hpp"

using namespace tessera;

namespace {

std::string value_of(const std::vector<SeedChoice>& choices, std::string_view key) {
  for (const SeedChoice& c : choices)
    if (c.key == key) return c.value;
  return "?";
}

void check(const std::vector<SeedChoice>& choices, std::vector<std::string_view> args) {
  check_seed_args(split_seed_args(args, choices), choices);
}

}  // namespace

TEST_CASE("each experiment type names its policies in the seeds' words", "[config][seed_keys]") {
  const auto plain = seed_choices<Experiment<models::Llama>>(1);
  CHECK(value_of(plain, "precision") == "32-true");
  CHECK(value_of(plain, "optim") == "adamw");
  CHECK(value_of(plain, "act_ckpt") == "false");
  CHECK(value_of(plain, "strategy") == "auto");
  CHECK(value_of(plain, "use_lora") == "false");
  CHECK(value_of(plain, "devices") == "1");
  const auto offload = seed_choices<Experiment<models::Llama, ShardGradOp, Bf16True, OffloadOptimizer>>(4);
  CHECK(value_of(offload, "precision") == "bf16-true");
  CHECK(value_of(offload, "optim") == "deepspeed_cpu");
  CHECK(value_of(offload, "strategy") == "deepspeed_stage_2_offload");
  CHECK(value_of(offload, "devices") == "4");
  CHECK(value_of(seed_choices<Experiment<models::Llama, FullShard, OffloadParams>>(2), "strategy") ==
        "deepspeed_stage_3_offload");
  CHECK(value_of(seed_choices<Experiment<models::Llama, FullShard, CheckpointEveryBlock>>(2), "act_ckpt") == "true");
  CHECK(value_of(seed_choices<Experiment<models::Llama, Zero1, Fp16Mixed>>(8), "strategy") == "deepspeed_stage_1");
  CHECK(value_of(seed_choices<Experiment<models::Llama, Zero1, Fp16Mixed>>(8), "precision") == "16-mixed");
  CHECK(value_of(seed_choices<Experiment<models::Llama, Adam8bit>>(1), "optim") == "adam_8bit");
  CHECK(value_of(seed_choices<Experiment<models::Llama, QLora>>(1), "use_qlora") == "true");
  CHECK(value_of(seed_choices<Experiment<models::Llama, QLora>>(1), "use_lora") == "false");
  CHECK(value_of(seed_choices<Experiment<models::Llama, HybridShard>>(4), "strategy") == "fsdp_hybrid_shard");
}

TEST_CASE("a seed key that names the binary passes, with any of its spellings, others are refused", "[config][seed_keys]") {
  const auto choices = seed_choices<Experiment<models::Llama, Ddp, Bf16Mixed>>(4);
  CHECK_NOTHROW(check(choices, {"precision=bf16-mixed", "optim=adamw", "act_ckpt=False", "strategy=ddp", "devices=4",
                                "batch_size=2"}));
  CHECK_NOTHROW(check(choices, {"precision=bf16"}));  // Lightning's alias of bf16-mixed
  const SeedArgs split = split_seed_args(std::vector<std::string_view>{"precision=bf16", "lr=1", "x"}, choices);
  CHECK(split.given.size() == 1);
  CHECK(split.rest == std::vector<std::string_view>{"lr=1", "x"});
  CHECK_THROWS_WITH(check(choices, {"precision=32-true"}),
                    Catch::StartsWith("precision=32-true: this binary is precision=bf16-mixed, fixed when it was compiled"));
  CHECK_THROWS_WITH(check(choices, {"devices=1"}),
                    Catch::StartsWith("devices=1: this binary is devices=4 (the job's ranks); start 1 ranks with mpirun -np 1"));
  // Every mismatch at once, one per line.
  CHECK_THROWS_WITH(check(choices, {"act_ckpt=true", "strategy=fsdp"}),
                    Catch::Contains("act_ckpt=true: this binary is act_ckpt=false") &&
                        Catch::Contains("\nstrategy=fsdp: this binary is strategy=ddp"));
}
