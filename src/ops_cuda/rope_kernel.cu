// The CUDA kernel of ops::rope (include/tessera/ops/rope_cuda.hpp): one thread per pair (x_j, x_{j+d/2}) of a row,
// fp32 arithmetic, one rounding per output. Consecutive threads take consecutive j, so a warp's loads and stores
// are contiguous within a row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../../include/tessera/ops/rope_cuda.hpp"  // relative: builds with no -I
#include "../cuda_common/float_convert.cuh"

namespace tessera::cuda {
namespace {

struct Strides {  // elements; the last dimension's is 1
  std::int64_t b, h, t;
};

template <class T>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ cos,
                            const T* __restrict__ sin, std::int64_t heads, std::int64_t t, std::int64_t half,
                            Strides xs, Strides ys, std::int64_t pairs, bool backward) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += step) {
    const std::int64_t j = p % half;
    const std::int64_t row = p / half;  // over (b, heads, t)
    const std::int64_t ti = row % t;
    const std::int64_t rest = row / t;
    const std::int64_t hi = rest % heads, bi = rest / heads;
    const T* xr = x + bi * xs.b + hi * xs.h + ti * xs.t;
    T* yr = y + bi * ys.b + hi * ys.h + ti * ys.t;
    const T* cr = cos + ti * 2 * half;
    const T* sr = sin + ti * 2 * half;
    const float a = to_float(xr[j]), b = to_float(xr[j + half]);
    const float c0 = to_float(cr[j]), c1 = to_float(cr[j + half]);
    const float s0 = to_float(sr[j]), s1 = to_float(sr[j + half]);
    const float y0 = backward ? a * c0 + b * s1 : a * c0 - b * s0;
    const float y1 = backward ? b * c1 - a * s0 : b * c1 + a * s1;
    yr[j] = from_float<T>(y0);
    yr[j + half] = from_float<T>(y1);
  }
}

template <class T>
const char* launch(const void* x, void* y, const void* cos, const void* sin, std::int64_t b, std::int64_t heads,
                   std::int64_t t, std::int64_t d, Strides xs, Strides ys, bool backward, cudaStream_t stream) {
  const std::int64_t half = d / 2;
  const std::int64_t pairs = b * heads * t * half;
  if (pairs == 0) return nullptr;
  constexpr int threads = 256;
  const std::int64_t wanted = (pairs + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < (1 << 20) ? wanted : (1 << 20));
  rope_kernel<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                 static_cast<const T*>(cos), static_cast<const T*>(sin), heads, t,
                                                 half, xs, ys, pairs, backward);
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}

}  // namespace

const char* rope_cuda(const void* x, void* y, const void* cos, const void* sin, FloatType type, std::int64_t b,
                      std::int64_t heads, std::int64_t t, std::int64_t d, const std::int64_t* x_strides,
                      const std::int64_t* y_strides, bool backward, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const Strides xs{x_strides[0], x_strides[1], x_strides[2]}, ys{y_strides[0], y_strides[1], y_strides[2]};
  switch (type) {
    case FloatType::f32: return launch<float>(x, y, cos, sin, b, heads, t, d, xs, ys, backward, s);
    case FloatType::f16: return launch<__half>(x, y, cos, sin, b, heads, t, d, xs, ys, backward, s);
    case FloatType::bf16: return launch<__nv_bfloat16>(x, y, cos, sin, b, heads, t, d, xs, ys, backward, s);
  }
  return "rope_cuda: unknown element type";
}

}  // namespace tessera::cuda
