#pragma once
// defines: the counting meta allocator. Tensors on LibTorch's meta device have shapes, dtypes and strides but no
// data; with this allocator installed each one's storage is still counted (bytes live and their high-water mark),
// so a training step run on meta tensors (predict/dry_run.hpp) reports what a real device would hold, phase by
// phase, without allocating it. Storage freed and refilled (FullShard's gathered units) is counted as it is.
#include <cstdint>

#include "tessera/memory/allocator_stats.hpp"

namespace tessera::memory {

// Idempotent and thread-safe.
void install_counting_meta_allocator();

AllocatorStats meta_allocator_stats();
void reset_meta_peak();
// Each allocation is counted rounded up to a multiple of `bytes`: 512 imitates the CUDA caching allocator's
// blocks, 1 (the default) counts exactly what the CPU allocator would.
void set_meta_rounding(std::int64_t bytes);

}  // namespace tessera::memory
