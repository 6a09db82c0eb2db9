// FullShard (ZeRO-3) under 1, 2 and 4 ranks: equal to the 1-rank run in fp32 (with accumulation and with
// checkpointed blocks) and in bf16-mixed, whatever the auto-wrap; parameters at 1/W per rank; forward peak
// bounded by the shard, the root unit, two gathered blocks and the activations; without auto-wrap the whole model
// stays gathered through the forward.
#include <unistd.h>

#include <filesystem>

#include "parity.hpp"

using namespace tessera;
using namespace tessera::testing;

using FsdpFp32 = Experiment<models::Llama, FullShard>;

TEST_CASE("FullShard equals the 1-rank run with world_size x batch_size rows (fp32)", "[sharding][fsdp]") {
  check_against_reference<FsdpFp32>(micro_parity_run(), 1e-5);
}

TEST_CASE("FullShard with gradient accumulation", "[sharding][fsdp]") {
  check_against_reference<FsdpFp32>(micro_parity_run(2, 2), 1e-5);
}

TEST_CASE("FullShard with every block checkpointed: gathered again for the recomputation", "[sharding][fsdp][checkpoint]") {
  check_against_reference<Experiment<models::Llama, FullShard, CheckpointEveryBlock>>(micro_parity_run(), 1e-5);
}

TEST_CASE("FullShard with tied embeddings: the head gathers the embedding unit too", "[sharding][fsdp]") {
  // The tiny preset unties them; a tied model comes from a model directory.
  RunConfig cfg = micro_parity_run();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tessera-tied-" + std::to_string(::getpid()) + "-" + std::to_string(world_rank()));
  std::filesystem::create_directories(dir);
  models::LlamaConfig c = models::llama_preset("tiny");
  c.tie_word_embeddings = true;
  models::Llama::write_config(dir / "config.json", c, "float32");
  {
    ParamStore store(models::Llama::parameters(c), at::kFloat, c10::Device("cpu"));
    store.initialize(c.initializer_range, 7);
    store.save(dir, store.full_units());
  }
  cfg.model_dir = dir.string();
  check_against_reference<FsdpFp32>(cfg, 1e-5);
  std::filesystem::remove_all(dir);
}

TEST_CASE("FullShard in bf16-mixed: bf16 gathers from fp32 master shards, fp32 gradient reduction",
          "[sharding][fsdp][bf16]") {
  // Tolerance as for Ddp in bf16-mixed (test_ddp.cpp): bf16 roundings of activations differ by one ulp
  // between GEMMs of B and of W*B rows.
  check_against_reference<Experiment<models::Llama, FullShard, Bf16Mixed>>(micro_parity_run(), 2e-3);
}

TEST_CASE("FullShard memory: params are 1/W of the 1-rank figure, forward peak within shard + 2 units + acts",
          "[sharding][fsdp][memory]") {
  const RunConfig cfg = micro_parity_run();
  const std::int64_t w = world_size();
  std::vector<memory::MemorySnapshot> snapshots;
  {
    Trainer<FsdpFp32> t(cfg, quiet());
    t.train_step(0);
    memory::reset_peak(c10::Device("cpu"));  // the peaks of step 1 are then the step's own
    t.train_step(1);
    snapshots = t.snapshots();
  }
  std::int64_t one_rank_params = 0, largest_unit = 0, units = 0, root = 0;
  {
    SoloScope solo;
    Trainer<FsdpFp32> t(cfg, quiet());
    one_rank_params = t.params().param_bytes();
    units = static_cast<std::int64_t>(t.params().num_units());
    const auto& r = t.engine().root_units();
    REQUIRE(r.size() == 2);  // the default wrap: every LlamaDecoderLayer; the embedding and the head are the root
    for (std::size_t u = 0; u < t.params().num_units(); ++u)
      if (std::find(r.begin(), r.end(), u) != r.end())
        root += 4 * t.params().padded_numel(u);
      else
        largest_unit = std::max(largest_unit, 4 * t.params().padded_numel(u));
  }
  // before_fwd of step 0 and step 1: the shard and nothing else gathered.
  for (const auto& s : snapshots) {
    if (s.phase != memory::Phase::before_forward) continue;
    INFO("step " << s.step << " params " << s.owned.params << " of " << one_rank_params << " on one rank");
    CHECK(s.owned.params <= one_rank_params / w + 4 * w * units);  // padding: < W elements per unit
    CHECK(s.owned.params >= one_rank_params / w);
  }
  // Step 1 (optimizer state exists, gradients released): the forward's peak is at most the owned bytes, the root
  // (gathered from the first call to the end of backward), two gathered blocks, the activations the forward
  // keeps, and the head's transient logits buffers (the same as on one rank with B rows, measured there).
  const memory::MemorySnapshot* before = nullptr;
  const memory::MemorySnapshot* after = nullptr;
  for (const auto& s : snapshots)
    if (s.step == 1 && s.phase == memory::Phase::before_forward) before = &s;
    else if (s.step == 1 && s.phase == memory::Phase::after_forward) after = &s;
  REQUIRE(before);
  REQUIRE(after);
  const std::int64_t logits = 3 * cfg.batch_size * cfg.seq_len * 4096 * 4;  // logits, their fp32 copy, softmax
  const std::int64_t bound = before->allocator.allocated + root + 2 * largest_unit + after->acts + logits;
  INFO("forward peak " << after->allocator.peak << " bound " << bound << " before " << before->allocator.allocated << " unit " << largest_unit << " acts " << after->acts << " after alloc " << after->allocator.allocated);
  CHECK(after->allocator.peak <= bound);
}

TEST_CASE("FullShard with other auto-wraps equals the 1-rank run (fp32)", "[sharding][fsdp][wrap]") {
  RunConfig cfg = micro_parity_run();
  SECTION("wrap_blocks=none: one root unit, the whole model gathered at once") { cfg.wrap_blocks = "none"; }
  SECTION("every unit wrapped: no root") { cfg.wrap_blocks = "LlamaDecoderLayer,embed_tokens,norm"; }
  check_against_reference<FsdpFp32>(cfg, 1e-5);
}

TEST_CASE("FullShard memory: without auto-wrap the whole model stays gathered through the forward",
          "[sharding][fsdp][memory][wrap]") {
  // The same step under the default wrap (root = embedding + head) and under wrap_blocks=none: the forward's
  // activations are the same, so the difference of the after-forward residual (acts) is the blocks' gathered
  // bytes, which the default frees after each block's forward.
  auto after_forward_acts = [](const std::string& wrap) {
    RunConfig cfg = micro_parity_run();
    cfg.wrap_blocks = wrap;
    cfg.memory_every = 1;
    Trainer<FsdpFp32> t(cfg, quiet());
    t.train_step(0);
    t.train_step(1);
    for (const auto& s : t.snapshots())
      if (s.step == 1 && s.phase == memory::Phase::after_forward) return s.acts;
    FAIL("no after_forward snapshot of step 1");
    return std::int64_t{0};
  };
  std::int64_t blocks = 0;
  {
    SoloScope solo;
    Trainer<FsdpFp32> t(micro_parity_run(), quiet());
    for (std::size_t u = 1; u + 1 < t.params().num_units(); ++u) blocks += 4 * t.params().padded_numel(u);
  }
  const std::int64_t wrapped = after_forward_acts("all"), whole = after_forward_acts("none");
  INFO("after-forward acts: default wrap " << wrapped << ", wrap_blocks=none " << whole << ", blocks " << blocks);
  CHECK(whole - wrapped >= blocks);
  CHECK(whole - wrapped <= blocks + blocks / 100);
}

TEST_CASE("wrap_blocks names what the family has", "[sharding][fsdp][wrap]") {
  RunConfig cfg = micro_parity_run();
  cfg.wrap_blocks = "OPTDecoderLayer";
  CHECK_THROWS_WITH((Trainer<FsdpFp32>(cfg, quiet())),
                    Catch::Contains("wrap_blocks=OPTDecoderLayer: 'OPTDecoderLayer' is no block type or module of "
                                    "llama; its block types are LlamaDecoderLayer"));
  cfg.wrap_blocks = "all";
  cfg.checkpoint_blocks = "LlamaDecoderLayer";
  CHECK_THROWS_WITH((Trainer<FsdpFp32>(cfg, quiet())), Catch::Contains("checkpoints nothing (NoCheckpoint)"));
}
