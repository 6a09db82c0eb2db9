// HybridShard under 1, 2 and 4 ranks: FullShard inside groups of shard_group_size ranks, replicated across
// groups; equal to the 1-rank run; a group size that does not divide the world is refused at start.
#include "parity.hpp"

using namespace tessera;
using namespace tessera::testing;

using HsdpFp32 = Experiment<models::Llama, HybridShard>;

namespace {
// Groups of 2 at 4 ranks (two groups: gradients cross groups), one group at 2 ranks, a group of one at 1.
RunConfig hybrid_run(std::int64_t accumulate = 1) {
  RunConfig cfg = micro_parity_run(2, accumulate);
  cfg.shard_group_size = std::min(2, world_size());
  return cfg;
}
}  // namespace

TEST_CASE("HybridShard equals the 1-rank run with world_size x batch_size rows (fp32)", "[sharding][hsdp]") {
  check_against_reference<HsdpFp32>(hybrid_run(), 1e-5);
}

TEST_CASE("HybridShard with gradient accumulation", "[sharding][hsdp]") {
  check_against_reference<HsdpFp32>(hybrid_run(2), 1e-5);
}

TEST_CASE("HybridShard: default group is the node's ranks", "[sharding][hsdp]") {
  RunConfig cfg = micro_parity_run();
  Trainer<HsdpFp32> t(cfg, quiet());
  CHECK(t.shard_group_size() == job::place().local_size);
}

TEST_CASE("HybridShard keeps 1/G of the parameters", "[sharding][hsdp][memory]") {
  const RunConfig cfg = hybrid_run();
  Trainer<HsdpFp32> t(cfg, quiet());
  const std::int64_t g = cfg.shard_group_size;
  std::int64_t padded = 0;
  for (std::size_t u = 0; u < t.params().num_units(); ++u) padded += t.params().padded_numel(u);
  CHECK(t.params().param_bytes() == 4 * padded / g);
}

TEST_CASE("HybridShard refuses a shard_group_size that does not divide the ranks", "[sharding][hsdp]") {
  RunConfig cfg = micro_parity_run();
  cfg.shard_group_size = 3;
  if (world_size() % 3 != 0)
    CHECK_THROWS_WITH((Trainer<HsdpFp32>(cfg, quiet())),
                      Catch::Contains("shard_group_size=3") && Catch::Contains("choose a divisor of"));
}

TEST_CASE("NoShard refuses a job of several ranks", "[sharding]") {
  if (world_size() > 1)
    CHECK_THROWS_WITH((Trainer<Experiment<models::Llama, NoShard>>(micro_parity_run(), quiet())),
                      Catch::Contains("runs in one process") && Catch::Contains("Ddp"));
}
