#include "tessera/engine/runtime.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <string>
#include <thread>

#include "tessera/core/cuda_kernels.hpp"
#include "tessera/core/error.hpp"
#include "tessera/memory/counting_cpu_allocator.hpp"
#include "tessera/memory/counting_meta_allocator.hpp"
#include "tessera/ops/cpu_lowp.hpp"

namespace tessera {

Runtime make_runtime(const RunConfig& cfg, const JobPlace& place) {
  memory::install_counting_cpu_allocator();
  Runtime rt;
  rt.rank = place.rank;
  rt.world_size = place.size;
  const bool want_cuda = cfg.device.rfind("cuda", 0) == 0;
  if (DryRunScope::active_target()) {  // a dry run: shapes without data (predict/dry_run.hpp)
    memory::install_counting_meta_allocator();
    rt.device = c10::Device(c10::DeviceType::Meta);
  } else if (want_cuda || cfg.device == "auto") {
    if (at::hasCUDA()) {
      const auto gpus = static_cast<int>(std::max<std::size_t>(1, at::getNumGPUs()));
      rt.device = want_cuda && cfg.device.size() > 4 ? c10::Device(cfg.device)
                                                     : c10::Device(c10::DeviceType::CUDA,
                                                                   static_cast<c10::DeviceIndex>(place.local_rank % gpus));
    } else if (want_cuda) {
      throw ConfigError("device=" + cfg.device + ": no CUDA device is usable here (" +
                        (cuda_kernels().loaded ? std::string("no GPU visible") : cuda_kernels().reason) +
                        "); use device=cpu or device=auto");
    }
  }
  const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  if (cfg.threads > cores)
    throw ConfigError("threads=" + std::to_string(cfg.threads) + ": this machine runs " + std::to_string(cores) +
                      " hardware threads; use at most " + std::to_string(cores) +
                      " (0 = the node's cores shared among its ranks)");
  rt.threads = cfg.threads > 0 ? cfg.threads : std::max<std::int64_t>(1, cores / std::max(1, place.local_size));
  at::set_num_threads(static_cast<int>(rt.threads));
  // tf32=: how CUDA runs fp32 matmuls and convolutions, through the settings torch's users set
  // (torch.set_float32_matmul_precision, torch.backends.cudnn.allow_tf32), which keep torch's older and newer views
  // of the precision consistent (setting the per-backend fp32_precision makes the older getters, which kernels may
  // still ask, refuse to answer); default leaves the process's as it is (torch's defaults).
  if (cfg.tf32 != Tf32::default_) {
    at::globalContext().setFloat32MatmulPrecision(cfg.tf32 == Tf32::on ? "high" : "highest");
    at::globalContext().setAllowTF32CuDNN(cfg.tf32 == Tf32::on);
  }
  return rt;
}


}  // namespace tessera

namespace tessera {

GemmChoice choose_gemm(CpuLowp setting, c10::ScalarType compute, c10::Device device, LossBlocks loss_blocks) {
  const c10::DeviceType target =
      device.is_meta() ? DryRunScope::active_target().value_or(c10::DeviceType::CPU) : device.type();
  const bool blocked =
      loss_blocks == LossBlocks::on || (loss_blocks == LossBlocks::auto_ && target != c10::DeviceType::CPU);
  GemmChoice choice{{ops::Lowp::native, blocked ? ops::kLossBlockBytes : 0}, ""};
  if (target != c10::DeviceType::CPU || (compute != at::kBFloat16 && compute != at::kHalf)) return choice;
  const std::string dtype = compute == at::kBFloat16 ? "bf16" : "fp16";
  if (setting == CpuLowp::native) {
    choice.reason = "LibTorch's " + dtype + " kernels (cpu_lowp=native)";
  } else if (setting == CpuLowp::widen) {
    choice.gemm.lowp = ops::Lowp::widen;
    choice.reason = "widened to fp32, rounded once (cpu_lowp=widen)";
  } else if (const ops::CpuLowpSupport support = ops::cpu_lowp_support(compute); support.native) {
    choice.reason = "LibTorch's " + dtype + " kernels (cpu_lowp=auto: " + support.reason + ")";
  } else {
    choice.gemm.lowp = ops::Lowp::widen;
    choice.reason = "widened to fp32, rounded once (cpu_lowp=auto: " + support.reason + ")";
  }
  return choice;
}

}  // namespace tessera
