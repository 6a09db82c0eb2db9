#pragma once
// defines: kernel_target, the device kind whose kernels a tensor's computation stands for. Model families use it to
// pick a device's fused kernels (models/llama.cpp: LibTorch's fused RMSNorm on CUDA) so that a dry run on the meta
// device (predict/dry_run.hpp) takes the same branch as the run it predicts.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <optional>

namespace tessera {

// t's own device type; for a meta tensor inside a DryRunScope (engine/job.hpp), the dry run's target.
c10::DeviceType kernel_target(const at::Tensor& t);

// The live dry run's target, nullopt outside one. DryRunScope sets it; it lives here (src/engine/target.cpp, no
// other dependency) so that the code that picks kernels (optimizers, ops) does not link the job machinery.
std::optional<c10::DeviceType> dry_run_target();
namespace detail {
void set_dry_run_target(std::optional<c10::DeviceType> target);
}  // namespace detail

}  // namespace tessera
