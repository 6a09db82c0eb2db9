#pragma once
// defines: tessera::OffloadOptimizer, ZeRO-Offload (DeepSpeed `offload_optimizer`, Lightning's
// deepspeed_stage_2_offload): the fp32 master copy of this rank's parameters (or shard) and the optimizer state
// live in pinned CPU memory. As backward finishes a unit's gradients they are copied to the CPU; the optimizer
// steps there (AdamW through the fused, vectorised, multi-threaded optim/cpu_adamw.hpp, one pass over memory);
// the updated parameters return to the device in the compute dtype.
// Device bytes per parameter (AdamW): 2 (bf16 params) + 2 (grads), optimizer state 0; the CPU holds 4 (master)
// + 8 (AdamW state) + 2 (gradient copy) + 2 (the bf16 copy-back buffer; none for fp32 on a CPU device). Works with every sharding policy; with ShardGradOp/FullShard each rank
// offloads only its shard.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct OffloadOptimizer {
  using axis = axis::offload;
  static constexpr std::string_view name = "optimizer";
  static constexpr bool offloads_optimizer = true;
  static constexpr bool offloads_parameters = false;
};

}  // namespace tessera
