// expect: two optimizer policies given
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>
#include <tessera/optim/adamw.hpp>
#include <tessera/optim/sgd.hpp>

using Bad = tessera::Experiment<tessera::models::Llama, tessera::Sgd, tessera::AdamW>;
Bad::optimizer* instantiate = nullptr;
