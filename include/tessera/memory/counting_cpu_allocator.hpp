#pragma once
// defines: the counting CPU allocator. Installed once per process (before the first tensor the engine
// allocates), it forwards every allocation to LibTorch's default CPU allocator and counts the bytes of
// live allocations and their high-water mark, so CPU memory figures are measured, not estimated.
#include <cstdint>

#include "tessera/memory/allocator_stats.hpp"

namespace tessera::memory {

// Idempotent and thread-safe. Tensors allocated before installation are not counted (and their
// release is not subtracted).
void install_counting_cpu_allocator();

AllocatorStats cpu_allocator_stats();
void reset_cpu_peak();
// An allocation that would bring the live bytes above `bytes` throws c10::OutOfMemoryError instead, as the CUDA
// caching allocator does when the GPU is full (max_memory=). 0 = no limit.
void set_cpu_limit(std::int64_t bytes);

}  // namespace tessera::memory
