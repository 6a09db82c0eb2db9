// expect: two adapter policies given
#include <tessera/adapter/lora.hpp>
#include <tessera/adapter/qlora.hpp>
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>

using Bad = tessera::Experiment<tessera::models::Llama, tessera::Lora, tessera::QLora>;
Bad::adapter* instantiate = nullptr;
