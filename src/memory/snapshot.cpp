#include "tessera/memory/snapshot.hpp"

#include <algorithm>
#include <cstdio>

namespace tessera::memory {

std::string_view phase_label(Phase phase) {
  switch (phase) {
    case Phase::before_forward: return "before_fwd";
    case Phase::after_forward: return "after_fwd";
    case Phase::after_backward: return "after_bwd";
    case Phase::after_optimizer_step: return "after_opt";
  }
  return "unknown";
}

MemorySnapshot make_snapshot(std::int64_t step, std::int64_t micro, Phase phase, std::int64_t rank, OwnedBytes owned,
                             AllocatorStats allocator) {
  MemorySnapshot s{step, micro, phase, rank, owned, 0, allocator};
  s.acts = allocator.allocated - owned.params - owned.grads - owned.optim;
  return s;
}

std::string gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string format_snapshot(const MemorySnapshot& s) {
  // Appended piece by piece: GCC 12 warns falsely (-Wstringop-overflow) on `"[" + std::string(...)` chains.
  std::string line("[");
  line += phase_label(s.phase);
  line += "] Params " + gib(s.owned.params) + " GiB | Grads " + gib(s.owned.grads) + " GiB | Optim " +
          gib(s.owned.optim) + " GiB";
  if (s.owned.optim_cpu) line += " (+" + gib(s.owned.optim_cpu) + " GiB on CPU)";
  line += " | Acts " + gib(s.acts) + " GiB | Allocated " + gib(s.allocator.allocated) + " GiB (peak " +
          gib(s.allocator.peak) + ") | Reserved " + gib(s.allocator.reserved) + " GiB";
  return line;
}

std::string format_snapshot_max(std::span<const MemorySnapshot> ranks) {
  if (ranks.empty()) return {};
  auto field = [&](std::string_view label, auto get) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < ranks.size(); ++k)
      if (get(ranks[k]) > get(ranks[best])) best = k;
    return std::string(label) + " " + gib(get(ranks[best])) + " GiB (r" + std::to_string(ranks[best].rank) + ")";
  };
  std::string line("[");
  line += phase_label(ranks[0].phase);
  line += "] ";
  line += field("Params", [](const MemorySnapshot& s) { return s.owned.params; }) + " | ";
  line += field("Grads", [](const MemorySnapshot& s) { return s.owned.grads; }) + " | ";
  line += field("Optim", [](const MemorySnapshot& s) { return s.owned.optim; }) + " | ";
  if (std::any_of(ranks.begin(), ranks.end(), [](const MemorySnapshot& s) { return s.owned.optim_cpu != 0; }))
    line += field("Optim on CPU", [](const MemorySnapshot& s) { return s.owned.optim_cpu; }) + " | ";
  line += field("Acts", [](const MemorySnapshot& s) { return s.acts; }) + " | ";
  line += field("Allocated", [](const MemorySnapshot& s) { return s.allocator.allocated; }) + " | ";
  line += field("Peak", [](const MemorySnapshot& s) { return s.allocator.peak; }) + " | ";
  line += field("Reserved", [](const MemorySnapshot& s) { return s.allocator.reserved; });
  return line + " | max over " + std::to_string(ranks.size()) + " ranks";
}

std::array<std::int64_t, snapshot_record_size> to_record(const MemorySnapshot& s) {
  return {s.step,         s.micro,         static_cast<std::int64_t>(s.phase), s.rank,
          s.owned.params, s.owned.grads,   s.owned.optim,                      s.owned.optim_cpu,
          s.allocator.allocated, s.allocator.peak, s.allocator.reserved};
}

MemorySnapshot from_record(std::span<const std::int64_t> r) {
  const OwnedBytes owned{r[4], r[5], r[6], r[7]};
  AllocatorStats stats;
  stats.allocated = r[8];
  stats.peak = r[9];
  stats.reserved = r[10];
  return make_snapshot(r[0], r[1], static_cast<Phase>(r[2]), r[3], owned, stats);
}

}  // namespace tessera::memory
