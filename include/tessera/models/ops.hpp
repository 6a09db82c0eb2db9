#pragma once
// defines: the few tensor ops whose CPU kernels are missing or slow in reduced precision.
// LibTorch's CPU backend (1.13) has no fp16 kernels for matmul and SiLU, and its bf16 GEMM is far slower
// than its fp32 GEMM on CPUs without bf16 units. On the CPU, fp16/bf16 GEMMs therefore run in fp32 on the
// exactly widened inputs and round the result once (as tensor cores accumulate in fp32), and fp16 SiLU
// runs in fp32. Every op boundary keeps the reduced dtype's range and rounding, so overflow to inf (and
// hence loss scaling) behaves as on a GPU. CUDA tensors always use the native kernels.
#include <ATen/core/Tensor.h>

namespace tessera::ops {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight);  // x @ weight^T
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b);
at::Tensor silu(const at::Tensor& x);

}  // namespace tessera::ops
