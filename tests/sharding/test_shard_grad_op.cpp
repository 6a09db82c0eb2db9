// ShardGradOp (ZeRO-2) under 1, 2 and 4 ranks: gradients and optimizer state sharded, result equal to the
// 1-rank run.
#include "parity.hpp"

using namespace tessera;
using namespace tessera::testing;

using Zero2Fp32 = Experiment<models::Llama, ShardGradOp>;

TEST_CASE("ShardGradOp equals the 1-rank run with world_size x batch_size rows (fp32)", "[sharding][zero2]") {
  check_against_reference<Zero2Fp32>(micro_parity_run(), 1e-5);
}

TEST_CASE("ShardGradOp with gradient accumulation: reduce-scattered every micro-step, summed in the shard",
          "[sharding][zero2]") {
  check_against_reference<Zero2Fp32>(micro_parity_run(2, 2), 1e-5);
}

TEST_CASE("ShardGradOp without auto-wrap: the root's gradients reduced together, with accumulation",
          "[sharding][zero2][wrap]") {
  RunConfig cfg = micro_parity_run(2, 2);
  cfg.wrap_blocks = "none";
  check_against_reference<Experiment<models::Llama, ShardGradOp>>(cfg, 1e-5);
}

TEST_CASE("ShardGradOp keeps 1/W of the gradients between backward and the optimizer step", "[sharding][zero2][memory]") {
  Trainer<Zero2Fp32> t(micro_parity_run(), quiet());
  const std::int64_t w = world_size();
  std::int64_t padded = 0;
  for (std::size_t u = 0; u < t.params().num_units(); ++u) padded += t.params().padded_numel(u);
  t.accumulate_gradients(0);
  CHECK(t.engine().grad_bytes() == 4 * padded / w);
  t.apply_gradients();
  CHECK(t.engine().grad_bytes() == 0);
  CHECK(t.params().param_bytes() == 4 * padded);
  CHECK(t.optimizer_bytes() == 8 * padded / w);
}
