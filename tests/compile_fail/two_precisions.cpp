// expect: two precision policies given
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>
#include <tessera/precision/bf16_mixed.hpp>
#include <tessera/precision/fp32.hpp>

using Bad = tessera::Experiment<tessera::models::Llama, tessera::Fp32, tessera::Bf16Mixed>;
Bad::precision* instantiate = nullptr;
