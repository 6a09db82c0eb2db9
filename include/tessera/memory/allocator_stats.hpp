#pragma once
// defines: AllocatorStats and how to read them for a device.
//   CUDA: the caching allocator's own counters (allocated = bytes in live tensors, reserved = bytes held
//         from cudaMalloc including the cache, peak = max allocated since start).
//   meta: the dry run's counting meta allocator (memory/counting_meta_allocator.hpp): bytes a real device would hold
//   CPU:  a counting wrapper around LibTorch's CPU allocator (memory/counting_cpu_allocator.hpp); the CPU
//         allocator caches nothing, so reserved equals allocated there.
#include <c10/core/Device.h>

#include <cstdint>

namespace tessera::memory {

struct AllocatorStats {
  std::int64_t allocated = 0;  // bytes
  std::int64_t peak = 0;       // bytes, max of allocated since the start of the run
  std::int64_t reserved = 0;   // bytes
};

// Installs the CPU counting allocator first if needed.
AllocatorStats allocator_stats(c10::Device device);

// Restarts the peak at the current allocation (so several runs in one process each get their own peak).
void reset_peak(c10::Device device);

// True when this build of tessera can read CUDA allocator statistics (built against a CUDA LibTorch).
bool cuda_stats_available();

}  // namespace tessera::memory
