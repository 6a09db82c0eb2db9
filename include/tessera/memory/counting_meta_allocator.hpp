#pragma once
// defines: the counting meta allocator. Tensors on LibTorch's meta device have shapes, dtypes and strides but no
// data; with this allocator installed each one's storage is still counted (bytes live and their high-water mark),
// so a training step run on meta tensors (predict/dry_run.hpp) reports what a real device would hold, phase by
// phase, without allocating it. Storage freed and refilled (FullShard's gathered units) is counted as it is, and on
// request (MetaPeakTagging) what held the bytes at the peak.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/memory/allocator_stats.hpp"

namespace tessera::memory {

// Idempotent and thread-safe.
void install_counting_meta_allocator();

AllocatorStats meta_allocator_stats();
void reset_meta_peak();
// Each allocation is counted rounded up to a multiple of `bytes`: 512 imitates the CUDA caching allocator's
// blocks, 1 (the default) counts exactly what the CPU allocator would.
void set_meta_rounding(std::int64_t bytes);

// What the counted bytes were at their high-water mark, by what allocated them and the storages' size: the
// innermost LibTorch operator running (RecordFunction's name), and in backward the autograd node it ran for
// ("aten::mm in MmBackward0"), or the node alone when it allocated outside any operator.
struct PeakHolder {
  std::string made_by;
  std::int64_t storage_bytes = 0;  // each storage's (rounded as counted); 0 for "(before)", of any size
  std::int64_t bytes = 0;          // live at the peak: storage_bytes x tensors
  std::int64_t tensors = 0;        // storages
};
struct PeakHolders {
  std::vector<PeakHolder> holders;  // largest first
  std::string reached_in;           // what allocated the storage that set the peak
};

// While one is alive, every meta allocation is tagged with what made it (a RecordFunction callback per operator,
// on every thread, so only for dry runs), and each new high (or reset_meta_peak) keeps the live bytes per tag.
// One at a time (an Error for a second); what was allocated before it began counts as "(before)".
class MetaPeakTagging {
 public:
  MetaPeakTagging();
  ~MetaPeakTagging();
  MetaPeakTagging(const MetaPeakTagging&) = delete;
  MetaPeakTagging& operator=(const MetaPeakTagging&) = delete;
  PeakHolders at_peak() const;

 private:
  std::uint64_t callback_ = 0;
};

}  // namespace tessera::memory
