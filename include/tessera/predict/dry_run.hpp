#pragma once
// defines: Prediction and dry_run<Exp>(cfg, world_size), the memory and time of a run predicted by running the run
// itself on LibTorch's meta device: the same Trainer, model family, policies and engine, on tensors that have shapes
// and no data, counted by the counting meta allocator (memory/counting_meta_allocator.hpp), as one rank of the job
// (engine/job.hpp's DryRunScope: communicators that move nothing and count bytes). No rule is written twice: each
// policy's parameters, gradients, buckets, gathered units, optimizer state and host buffers, and each family's
// activations, are whatever their own code allocates. Two optimizer steps run (step 0 creates the optimizer state),
// no weight is drawn or read (model_dir's header is checked), nothing is written.
//
// What it does not see: memory a kernel takes outside LibTorch's allocator (cuBLAS and NCCL workspaces, the CUDA
// context), the caching allocator's fragmentation (reserved above allocated; each allocation is rounded to its 512-byte
// blocks), and transient buffers of kernels a dry run does not execute (the fused CPU AdamW step allocates none).
#include <c10/core/DeviceType.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/dist/shape_communicator.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/memory/counting_meta_allocator.hpp"
#include "tessera/memory/snapshot.hpp"
#include "tessera/report/reporter.hpp"

namespace tessera::predict {

// Meta kernels LibTorch's C++ library lacks, and attention on meta tensors as the target device would run it.
// Idempotent; dry_run calls it.
void register_meta_kernels();

struct Prediction {
  std::int64_t world_size = 1;
  c10::DeviceType target = c10::DeviceType::CPU;
  // Step 1's four phases on rank 0 (each the micro-step with the most allocated), as the run's memory table shows
  // them. host_is_device is set: `allocated` includes host figures (owned.cpu()), which a GPU does not hold.
  std::vector<memory::MemorySnapshot> phases;
  // Every snapshot of both steps in the order taken (step 0's phases, then step 1's); each one's allocator.peak is
  // the high-water mark up to it, so the first over a limit names the interval where a run would run out.
  std::vector<memory::MemorySnapshot> timeline;
  std::int64_t peak = 0;      // the allocator's high-water mark over both steps (host figures included)
  std::int64_t host = 0;      // host memory under offload after the step (owned.cpu())
  dist::CollectiveBytes comm;  // step 1's collectives on rank 0
  double step_flops = 0;      // the model FLOPs of one optimizer step, all ranks (0: the family does not count them)
  std::int64_t tokens_per_step = 0;
  // With peak_holders=N > 0: what the bytes live at `peak` were, by what allocated them (largest first).
  memory::PeakHolders holders;

  // What one device holds at its peak: on a GPU the host figures are not device memory; on the CPU they are.
  std::int64_t device_peak() const { return target == c10::DeviceType::CPU ? peak : std::max<std::int64_t>(0, peak - host); }
  std::int64_t device_allocated(const memory::MemorySnapshot& s) const {
    return target == c10::DeviceType::CPU ? s.allocator.allocated : s.allocator.allocated - s.owned.cpu();
  }
  // The predicted step time: compute at `mfu` of `peak_flops_per_device` plus the ring collectives over links of
  // `link_bytes_per_s`, not overlapped (an upper bound); nullopt when the peak or the FLOPs are unknown.
  std::optional<double> step_seconds(double peak_flops_per_device, double mfu, double link_bytes_per_s) const;
};

// The device a run of `cfg` is predicted for: CUDA when device= asks for it, or when device=auto and this process
// sees a GPU; else the CPU.
c10::DeviceType target_of(const RunConfig& cfg);

// The verdict against `device_memory` bytes: "FITS" or "DOES NOT FIT: <phase> ... <tensor class> ...".
struct Verdict {
  bool fits = true;
  std::string text;
};
Verdict judge(const Prediction& p, std::int64_t device_memory);

// The prediction table --dry-run prints: one row per phase (params, grads, optimizer state on the device and on the
// host, activations and buffers, allocated), the peak, with peak_holders=N its N largest holders, the collectives
// and the step time.
std::string format_prediction(const Prediction& p, const RunConfig& cfg, double peak_flops_per_device);

// device_memory= in bytes, else this machine's device's: a GPU's total memory, the host's physical memory on the
// CPU (a target GPU this process cannot see: nullopt, give device_memory=).
std::optional<std::int64_t> device_memory_bytes(const RunConfig& cfg, c10::DeviceType target);

// Runs Trainer<Exp> as rank 0 of `world_size` ranks on the meta device for two optimizer steps.
template <class Trainer>
Prediction dry_run(RunConfig cfg, int world_size, int ranks_per_node = 8) {
  register_meta_kernels();
  const c10::DeviceType target = target_of(cfg);
  cfg.max_steps = 2;
  cfg.metrics.clear();
  cfg.save_dir.clear();
  cfg.predict = false;
  Prediction p;
  p.world_size = world_size;
  p.target = target;
  DryRunScope scope(0, world_size, ranks_per_node, target);
  memory::set_meta_rounding(target == c10::DeviceType::CUDA ? 512 : 1);
  {
    std::optional<memory::MetaPeakTagging> tagging;
    if (cfg.peak_holders > 0) tagging.emplace();
    Trainer trainer(cfg, ReportOptions{false, 1, false, false});
    memory::reset_peak(c10::Device(c10::DeviceType::Meta));
    const std::int64_t steps = std::min<std::int64_t>(2, trainer.total_steps());
    dist::CollectiveBytes before;
    for (std::int64_t s = 0; s < steps; ++s) {
      if (s + 1 == steps) before = scope.bytes();
      trainer.train_step(s);
    }
    p.peak = memory::allocator_stats(c10::Device(c10::DeviceType::Meta)).peak;
    const dist::CollectiveBytes& after = scope.bytes();
    p.comm = {after.all_reduce - before.all_reduce, after.all_gather - before.all_gather,
              after.reduce_scatter - before.reduce_scatter, after.broadcast - before.broadcast,
              after.ops - before.ops, after.ring - before.ring};
    p.timeline = trainer.snapshots();
    for (memory::Phase phase : {memory::Phase::before_forward, memory::Phase::after_forward,
                                memory::Phase::after_backward, memory::Phase::after_optimizer_step}) {
      std::optional<memory::MemorySnapshot> best;
      for (const memory::MemorySnapshot& s : trainer.snapshots())
        if (s.step == steps - 1 && s.phase == phase && (!best || s.allocator.allocated > best->allocator.allocated))
          best = s;
      if (best) p.phases.push_back(*best);
    }
    if (!p.phases.empty()) p.host = p.phases.back().owned.cpu();
    p.step_flops = trainer.step_flops();
    p.tokens_per_step = trainer.tokens_per_step();
    if (tagging) p.holders = tagging->at_peak();
  }
  memory::set_meta_rounding(1);
  return p;
}

}  // namespace tessera::predict
