#pragma once
// defines: Runtime, the process-level setup every experiment shares: device, CPU threads, the counting
// CPU allocator.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "tessera/config/run_config.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/ops/gemm.hpp"

namespace tessera {

struct Runtime {
  c10::Device device{c10::DeviceType::CPU};
  std::int64_t threads = 1;     // intra-op CPU threads in use
  std::int64_t rank = 0;
  std::int64_t world_size = 1;
};

// Host memory for a computation on `device` (offloaded optimizer state, CPU masters): the CPU, or the meta device
// itself in a dry run, whose allocator counts both.
inline c10::Device host_of(c10::Device device) {
  return device.is_meta() ? device : c10::Device(c10::DeviceType::CPU);
}

// Resolves device=auto|cpu|cuda|cuda:N (ConfigError when CUDA is asked for and absent; auto and cuda give
// rank k of a node the GPU local_rank mod GPUs; the meta device inside a DryRunScope), sets the intra-op thread count (threads=0: the node's cores
// shared among its ranks), and installs the counting CPU allocator before any tensor is made.
Runtime make_runtime(const RunConfig& cfg, const JobPlace& place = {});

// How a run's matrix products in `compute` dtype run on `device` (the meta device: the dry run's target), from
// cpu_lowp=: widened only for bf16/fp16 on a CPU. `reason` says why, for the experiment table; empty when the
// setting changes nothing (fp32, or not a CPU). loss_blocks=: the heads' loss in blocks of ops::kLossBlockBytes
// (auto: where the device is a GPU).
struct GemmChoice {
  ops::Gemm gemm;
  std::string reason;
};
GemmChoice choose_gemm(CpuLowp setting, c10::ScalarType compute, c10::Device device,
                       LossBlocks loss_blocks = LossBlocks::auto_);

}  // namespace tessera
