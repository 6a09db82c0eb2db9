// expect: OffloadParams keeps parameter SHARDS in CPU memory
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>
#include <tessera/offload/offload_params.hpp>
#include <tessera/sharding/shard_grad_op.hpp>

using Bad = tessera::Experiment<tessera::models::Llama, tessera::OffloadParams, tessera::ShardGradOp>;
Bad::offload* instantiate = nullptr;
