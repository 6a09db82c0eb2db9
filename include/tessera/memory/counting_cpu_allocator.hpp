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

}  // namespace tessera::memory
