// Zero1 under 1, 2 and 4 ranks: optimizer state sharded (1/W per rank), result equal to the 1-rank run.
#include "parity.hpp"

using namespace tessera;
using namespace tessera::testing;

using Zero1Fp32 = Experiment<models::Llama, Zero1>;

TEST_CASE("Zero1 equals the 1-rank run with world_size x batch_size rows (fp32)", "[sharding][zero1]") {
  check_against_reference<Zero1Fp32>(micro_parity_run(), 1e-5);
}

TEST_CASE("Zero1 with gradient accumulation", "[sharding][zero1]") {
  check_against_reference<Zero1Fp32>(micro_parity_run(2, 2), 1e-5);
}

TEST_CASE("Zero1 shards the optimizer state only", "[sharding][zero1][memory]") {
  Trainer<Zero1Fp32> t(micro_parity_run(), quiet());
  const std::int64_t w = world_size();
  std::int64_t padded = 0;
  for (std::size_t u = 0; u < t.params().num_units(); ++u) padded += t.params().padded_numel(u);
  CHECK(padded - t.params().numel() < w * static_cast<std::int64_t>(t.params().num_units()));
  t.accumulate_gradients(0);
  CHECK(t.engine().grad_bytes() == 4 * padded);  // full gradients
  t.apply_gradients();
  CHECK(t.params().param_bytes() == 4 * padded);  // full parameters
  CHECK(t.optimizer_bytes() == 8 * padded / w);    // AdamW's two moments of this rank's shard
}
