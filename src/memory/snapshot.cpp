#include "tessera/memory/snapshot.hpp"

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
  std::string line = "[" + std::string(phase_label(s.phase)) + "] Params " + gib(s.owned.params) + " GiB | Grads " +
                     gib(s.owned.grads) + " GiB | Optim " + gib(s.owned.optim) + " GiB";
  if (s.owned.optim_cpu) line += " (+" + gib(s.owned.optim_cpu) + " GiB on CPU)";
  line += " | Acts " + gib(s.acts) + " GiB | Allocated " + gib(s.allocator.allocated) + " GiB (peak " +
          gib(s.allocator.peak) + ") | Reserved " + gib(s.allocator.reserved) + " GiB";
  return line;
}

}  // namespace tessera::memory
