// expect: offloading it is not supported. Remove OffloadOptimizer
#include <tessera/adapter/qlora.hpp>
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>
#include <tessera/offload/offload_optimizer.hpp>

using Bad = tessera::Experiment<tessera::models::Llama, tessera::QLora, tessera::OffloadOptimizer>;
Bad::adapter* instantiate = nullptr;
