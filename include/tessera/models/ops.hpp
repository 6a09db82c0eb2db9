#pragma once
// defines: the few tensor ops whose kernels some backends lack in reduced precision.
// LibTorch's CPU backend (1.13) has no fp16 kernels for matmul and SiLU. For an fp16 tensor on the
// CPU these run in fp32 and round the result back to fp16, which keeps fp16's range and rounding
// at every op boundary (so overflow to inf, and hence loss scaling, behaves as on a GPU).
#include <ATen/core/Tensor.h>

namespace tessera::ops {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight);  // x @ weight^T
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b);
at::Tensor silu(const at::Tensor& x);

}  // namespace tessera::ops
