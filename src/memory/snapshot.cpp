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
                             AllocatorStats allocator, bool host_is_device) {
  MemorySnapshot s{step, micro, phase, rank, owned, 0, allocator, host_is_device};
  s.acts = allocator.allocated - owned.params - owned.grads - owned.optim - (host_is_device ? owned.cpu() : 0);
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
  const std::string_view device_label = s.host_is_device ? " device " : " GPU ";
  auto figure = [&](std::string_view name, std::int64_t device, std::int64_t host) {
    line += name;
    if (!host) {
      line += " " + gib(device) + " GiB";
      return;
    }
    line += device_label;
    line += gib(device) + " GiB | ";
    line += name;
    line += " CPU " + gib(host) + " GiB";
  };
  line += "] ";
  figure("Params", s.owned.params, s.owned.params_cpu);
  line += " | ";
  figure("Grads", s.owned.grads, s.owned.grads_cpu);
  line += " | ";
  figure("Optim", s.owned.optim, s.owned.optim_cpu);
  line += " | Acts " + gib(s.acts) + " GiB | Allocated " + gib(s.allocator.allocated) + " GiB (peak " +
          gib(s.allocator.peak) + ") | Reserved " + gib(s.allocator.reserved) + " GiB";
  if (s.widened_peak > 0) line += " | Widened " + gib(s.widened_peak) + " GiB (peak)";
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
  if (std::any_of(ranks.begin(), ranks.end(), [](const MemorySnapshot& s) { return s.owned.cpu() != 0; })) {
    line += field("Params CPU", [](const MemorySnapshot& s) { return s.owned.params_cpu; }) + " | ";
    line += field("Grads CPU", [](const MemorySnapshot& s) { return s.owned.grads_cpu; }) + " | ";
    line += field("Optim CPU", [](const MemorySnapshot& s) { return s.owned.optim_cpu; }) + " | ";
  }
  line += field("Acts", [](const MemorySnapshot& s) { return s.acts; }) + " | ";
  // The seeds' "Allocated X (peak Y)", each with the rank it is from.
  std::string peak = field("peak", [](const MemorySnapshot& s) { return s.allocator.peak; });
  peak.replace(peak.find(" GiB (r"), 7, ", r");
  line += field("Allocated", [](const MemorySnapshot& s) { return s.allocator.allocated; }) + " (" + peak + " | ";
  line += field("Reserved", [](const MemorySnapshot& s) { return s.allocator.reserved; });
  if (std::any_of(ranks.begin(), ranks.end(), [](const MemorySnapshot& s) { return s.widened_peak > 0; }))
    line += " | " + field("Widened", [](const MemorySnapshot& s) { return s.widened_peak; }) + " (peak)";
  return line + " | max over " + std::to_string(ranks.size()) + " ranks";
}

std::array<std::int64_t, snapshot_record_size> to_record(const MemorySnapshot& s) {
  return {s.step,           s.micro,         static_cast<std::int64_t>(s.phase), s.rank,
          s.owned.params,   s.owned.grads,   s.owned.optim,                      s.owned.optim_cpu,
          s.owned.params_cpu, s.owned.grads_cpu, s.acts,
          s.allocator.allocated, s.allocator.peak, s.allocator.reserved, s.host_is_device ? 1 : 0,
          s.widened_peak};
}

MemorySnapshot from_record(std::span<const std::int64_t> r) {
  MemorySnapshot s;
  s.step = r[0];
  s.micro = r[1];
  s.phase = static_cast<Phase>(r[2]);
  s.rank = r[3];
  s.owned = OwnedBytes{r[4], r[5], r[6], r[7], r[8], r[9]};
  s.acts = r[10];
  s.allocator.allocated = r[11];
  s.allocator.peak = r[12];
  s.allocator.reserved = r[13];
  s.host_is_device = r[14] != 0;
  s.widened_peak = r[15];
  return s;
}

}  // namespace tessera::memory
