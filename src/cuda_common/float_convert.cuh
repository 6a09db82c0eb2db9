// to_float / from_float: the element types of tessera's CUDA kernels (core/cuda_float_type.hpp) to and from fp32,
// rounding to nearest even (the _rn intrinsics), for src/optim_cuda/ and src/ops_cuda/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tessera::cuda {

template <class T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

}  // namespace tessera::cuda
