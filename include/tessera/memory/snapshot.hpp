#pragma once
// defines: the training phases and MemorySnapshot, one row of the memory table.
// params/grads/optim are exact byte sums of the tensors the engine owns on the compute device, and
// params_cpu/grads_cpu/optim_cpu of those it keeps in host memory while computing on a device (CPU offload);
// allocated/peak/reserved come from the device's allocator (memory/allocator_stats.hpp); acts is the residual
// the seeds define:
//   acts = allocated - params - grads - optim   (- the *_cpu figures too when the device is the CPU itself)
// so it holds activations plus whatever else is live (cast copies, communication buffers).
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tessera/memory/allocator_stats.hpp"

namespace tessera::memory {

enum class Phase { before_forward, after_forward, after_backward, after_optimizer_step };

// "before_fwd", "after_fwd", "after_bwd", "after_opt": the labels of the metrics file and the table.
std::string_view phase_label(Phase phase);

struct OwnedBytes {
  std::int64_t params = 0;      // on the compute device
  std::int64_t grads = 0;
  std::int64_t optim = 0;
  std::int64_t optim_cpu = 0;   // optimizer state in host memory (OffloadOptimizer)
  std::int64_t params_cpu = 0;  // fp32 master parameters or parameter shards in host memory
  std::int64_t grads_cpu = 0;   // gradient copies in host memory, for the CPU optimizer step
  std::int64_t cpu() const { return optim_cpu + params_cpu + grads_cpu; }
};

struct MemorySnapshot {
  std::int64_t step = 0;
  std::int64_t micro = 0;
  Phase phase = Phase::before_forward;
  std::int64_t rank = 0;
  OwnedBytes owned;
  std::int64_t acts = 0;
  AllocatorStats allocator;
  bool host_is_device = false;  // computing on the CPU: the host figures are of the device's own memory
  // cpu_lowp=widen: the most bytes of fp32 copies of 16-bit operands live at once since the previous snapshot
  // (ops/gemm.hpp). Transient, inside one product: part of the allocator's peak, never of `allocated` here.
  std::int64_t widened_peak = 0;
};

// host_is_device: the allocator counted is the CPU's, so the host-memory figures are inside `allocated` too.
MemorySnapshot make_snapshot(std::int64_t step, std::int64_t micro, Phase phase, std::int64_t rank, OwnedBytes owned,
                             AllocatorStats allocator, bool host_is_device = false);

// "[after_bwd] Params 1.23 GiB | Grads 1.23 GiB | Optim 0.00 GiB | Acts 2.10 GiB | Allocated 4.56 GiB (peak 5.01) | Reserved 6.00 GiB"
// Host-memory figures, when non-zero, split their figure as the seeds print it under offload:
// "Optim GPU 0.00 GiB | Optim CPU 9.80 GiB" ("device" for GPU when computing on the CPU itself); a widened peak,
// when non-zero, ends the line: " | Widened 0.02 GiB (peak)".
std::string format_snapshot(const MemorySnapshot& snapshot);

// Snapshots of several ranks in one line: each figure the highest over the ranks, with the rank it is from.
// "[after_bwd] Params 0.30 GiB (r0) | Grads ... | Allocated 5.10 GiB (r2) (peak 5.90, r3) | Reserved 6.00 GiB (r3) |
//  max over 4 ranks"
std::string format_snapshot_max(std::span<const MemorySnapshot> ranks);

// A snapshot as integers (to gather over ranks) and back.
inline constexpr std::size_t snapshot_record_size = 16;
std::array<std::int64_t, snapshot_record_size> to_record(const MemorySnapshot& snapshot);
MemorySnapshot from_record(std::span<const std::int64_t> record);

// bytes -> "1.23" (GiB, two decimals)
std::string gib(std::int64_t bytes);

}  // namespace tessera::memory
