#pragma once
// defines: MemoryProbe, the per-phase memory table of a run: at steps 0, 1 and every memory_every, before
// forward, after forward, after backward and after the optimizer step, each owner's bytes (OwnedBytes: the
// store, the engine's gradients, the optimizer's state, the host side) next to the allocator's figures. In a job
// of several ranks rank 0 receives every rank's snapshot (a collective at each point) and reports them.
#include <cstdint>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/engine/runtime.hpp"
#include "tessera/memory/snapshot.hpp"
#include "tessera/report/reporter.hpp"

namespace tessera {

class MemoryProbe {
 public:
  // The first snapshot's widened peak counts from here.
  MemoryProbe(const RunConfig& cfg, const Runtime& runtime, Reporter& reporter);

  bool due(std::int64_t step) const { return step <= 1 || step % every_ == 0; }
  // Records (and prints on rank 0) one point; `owned` is this rank's figures. Collective when due.
  void take(std::int64_t step, std::int64_t micro, memory::Phase phase, const memory::OwnedBytes& owned);

  // This rank's snapshots so far, in order.
  const std::vector<memory::MemorySnapshot>& snapshots() const { return own_; }
  // On rank 0: every rank's snapshots, in the order taken (rank 0 .. W-1 at each point); empty elsewhere.
  const std::vector<memory::MemorySnapshot>& job_snapshots() const { return job_; }

 private:
  std::int64_t every_;
  MemoryRanks ranks_;
  MemoryMicro micro_;
  const Runtime& runtime_;
  Reporter& reporter_;
  std::vector<memory::MemorySnapshot> own_, job_;
};

}  // namespace tessera
