#pragma once
// defines: tessera::Ddp, distributed data parallel (PyTorch DDP). Every rank holds all parameters, gradients
// and optimizer state; gradients are averaged over the ranks in buckets of bucket_cap_mb (run config, 25 MiB
// by default; the first bucket, as in PyTorch DDP, at most 1 MiB), each bucket's all-reduce starting during backward as soon as its last unit's gradients are
// done. Gradients are views into the buckets (no second copy). With gradient accumulation only the last
// micro-step reduces (PyTorch's no_sync for the others).
// Bytes per parameter (fp32 AdamW): 4 params + 4 grads + 8 optimizer state, on every rank.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct Ddp {
  using axis = axis::sharding;
  static constexpr std::string_view name = "ddp";
  static constexpr bool shards_parameters = false;
  static constexpr bool shards_gradients = false;
  static constexpr bool shards_optimizer = false;
  static constexpr bool data_parallel = true;
  static constexpr bool hybrid = false;
};

}  // namespace tessera
