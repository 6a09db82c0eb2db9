#pragma once
// defines: kernel_target, the device kind whose kernels a tensor's computation stands for. Model families use it to
// pick a device's fused kernels (models/llama.cpp: LibTorch's fused RMSNorm on CUDA) so that a dry run on the meta
// device (predict/dry_run.hpp) takes the same branch as the run it predicts.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

namespace tessera {

// t's own device type; for a meta tensor inside a DryRunScope (engine/job.hpp), the dry run's target.
c10::DeviceType kernel_target(const at::Tensor& t);

}  // namespace tessera
