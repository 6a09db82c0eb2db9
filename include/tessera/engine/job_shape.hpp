#pragma once
// defines: shard_group_size<Sharding>(cfg, place) and shard_plan<Sharding, Precision>(cfg, device): how a job of
// W ranks is cut for a sharding policy, checked once before anything is allocated.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/engine/unit_engine.hpp"
#include "tessera/sharding/concept.hpp"

namespace tessera {

// reduce_dtype as a torch dtype; param and auto as Undefined (ShardPlan::reduce_dtype: the engine chooses).
c10::ScalarType reduce_dtype_of(ReduceDtype dtype);

// Ranks per shard group for a policy in a job, or ConfigError saying why the job does not suit it.
// The same on every rank (it depends on the config and the job's shape only), so all ranks refuse together.
template <class Sharding>
std::int64_t shard_group_size(const RunConfig& cfg, const JobPlace& place) {
  if constexpr (!Sharding::data_parallel) {
    if (place.size > 1)
      throw ConfigError("sharding " + std::string(Sharding::name) + " runs in one process but this job has " +
                        std::to_string(place.size) +
                        " ranks; launch it without mpirun, or build the experiment with Ddp, Zero1, ShardGradOp, "
                        "FullShard or HybridShard");
    return 1;
  } else if constexpr (!Sharding::shards_optimizer) {
    return 1;
  } else if constexpr (!Sharding::hybrid) {
    return place.size;
  } else {
    const std::int64_t g = cfg.shard_group_size > 0 ? cfg.shard_group_size : place.local_size;
    if (place.size % g != 0) {
      const std::string w = std::to_string(place.size);
      throw ConfigError(cfg.shard_group_size > 0
                            ? "shard_group_size=" + std::to_string(g) + ": does not divide the " + w +
                                  " ranks of this job; choose a divisor of " + w
                            : "shard_group_size=0: the default group, the " + std::to_string(g) +
                                  " ranks of one node, does not divide the " + w +
                                  " ranks of this job (uneven nodes); set shard_group_size to a divisor of " + w);
    }
    return g;
  }
}

// What the engine does for the policy: its stage, gradient buckets, and the dtypes of compute and reduction.
template <class Sharding, class Precision>
ShardPlan shard_plan(const RunConfig& cfg, c10::Device device) {
  ShardPlan p;
  p.device = device;
  p.stage = sharding_stage<Sharding>;
  p.bucket_bytes = static_cast<std::int64_t>(cfg.bucket_cap_mb * 1024.0 * 1024.0);
  p.compute_dtype = Precision::compute_dtype;
  p.reduce_dtype = reduce_dtype_of(cfg.reduce_dtype);
  p.reduce_in_compute = cfg.reduce_dtype == ReduceDtype::auto_;
  return p;
}

}  // namespace tessera
