// expect: the first argument must be a model family
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>
#include <tessera/precision/bf16_mixed.hpp>

using Bad = tessera::Experiment<tessera::Bf16Mixed, tessera::models::Llama>;
Bad::precision* instantiate = nullptr;
