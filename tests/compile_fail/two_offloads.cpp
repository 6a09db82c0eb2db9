// expect: two offload policies given
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>
#include <tessera/offload/offload_optimizer.hpp>
#include <tessera/offload/offload_params.hpp>
#include <tessera/sharding/full_shard.hpp>

using Bad = tessera::Experiment<tessera::models::Llama, tessera::FullShard, tessera::OffloadOptimizer,
                                tessera::OffloadParams>;
Bad::offload* instantiate = nullptr;
