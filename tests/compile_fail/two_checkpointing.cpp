// expect: two checkpointing policies given
#include <tessera/checkpoint/every_nth.hpp>
#include <tessera/checkpoint/no_checkpoint.hpp>
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>

using Bad = tessera::Experiment<tessera::models::Llama, tessera::CheckpointEveryBlock, tessera::NoCheckpoint>;
Bad::checkpointing* instantiate = nullptr;
