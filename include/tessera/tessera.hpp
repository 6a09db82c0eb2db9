#pragma once
// defines: everything a research program needs: the experiment type, every built-in policy, the Llama
// family, the engine and tessera::main.
#include "tessera/checkpoint/every_nth.hpp"
#include "tessera/checkpoint/no_checkpoint.hpp"
#include "tessera/experiment.hpp"
#include "tessera/main.hpp"
#include "tessera/models/llama.hpp"
#include "tessera/optim/adamw.hpp"
#include "tessera/optim/sgd.hpp"
#include "tessera/precision/bf16_mixed.hpp"
#include "tessera/precision/bf16_true.hpp"
#include "tessera/precision/fp16_mixed.hpp"
#include "tessera/precision/fp32.hpp"
#include "tessera/sharding/no_shard.hpp"
