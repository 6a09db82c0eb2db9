// expect: Lora/QLora train small adapters on a frozen, replicated base
#include <tessera/adapter/lora.hpp>
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>
#include <tessera/sharding/full_shard.hpp>

using Bad = tessera::Experiment<tessera::models::Llama, tessera::FullShard, tessera::Lora>;
Bad::adapter* instantiate = nullptr;
