// implements: MemoryProbe (engine/memory_probe.hpp).
#include "tessera/engine/memory_probe.hpp"

#include <span>

#include "tessera/engine/job.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/ops/gemm.hpp"

namespace tessera {

MemoryProbe::MemoryProbe(const RunConfig& cfg, const Runtime& runtime, Reporter& reporter)
    : every_(cfg.memory_every), ranks_(cfg.memory_ranks), micro_(cfg.memory_micro), runtime_(runtime),
      reporter_(reporter) {
  ops::take_widened_peak();
}

void MemoryProbe::take(std::int64_t step, std::int64_t micro, memory::Phase phase, const memory::OwnedBytes& owned) {
  if (!due(step)) return;
  // The CPU's allocator, and the meta device's of a dry run (host_of(meta) is meta), count the host figures too.
  auto own = memory::make_snapshot(step, micro, phase, runtime_.rank, owned, memory::allocator_stats(runtime_.device),
                                   runtime_.device.is_cpu() || runtime_.device.is_meta());
  own.widened_peak = ops::take_widened_peak();
  own_.push_back(own);
  const bool print_line =
      micro == 0 || phase == memory::Phase::after_optimizer_step || micro_ == MemoryMicro::all;
  if (runtime_.world_size == 1) {
    reporter_.memory(own, print_line);
    return;
  }
  const auto record = memory::to_record(own);
  const std::vector<std::int64_t> all = job::gather_to_root(record);
  if (runtime_.rank != 0) return;
  std::vector<memory::MemorySnapshot> ranks;
  for (std::size_t k = 0; k * record.size() < all.size(); ++k)
    ranks.push_back(memory::from_record(std::span<const std::int64_t>(all).subspan(k * record.size(), record.size())));
  reporter_.memory_of_ranks(ranks, print_line, ranks_ == MemoryRanks::all);
  job_.insert(job_.end(), ranks.begin(), ranks.end());
}

}  // namespace tessera
