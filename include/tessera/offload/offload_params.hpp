#pragma once
// defines: tessera::OffloadParams, OffloadOptimizer plus parameter offload (DeepSpeed ZeRO-3 `offload_param`):
// each rank's fp32 parameter shards live in pinned CPU memory (they are the optimizer's master copy) and a
// unit is gathered to the device, in the compute dtype, just before its forward and backward. The device then
// holds no persistent parameters at all: only gathered units, gradient shards and activations.
// Needs a sharding policy that shards parameters (FullShard, HybridShard); Experiment<> refuses others.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct OffloadParams {
  using axis = axis::offload;
  static constexpr std::string_view name = "parameters+optimizer";
  static constexpr bool offloads_optimizer = true;
  static constexpr bool offloads_parameters = true;
};

}  // namespace tessera
