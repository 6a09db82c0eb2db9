// The fused CUDA kernel of Adam8bit: one thread block per 256-value block, one value per thread.
// The arithmetic is that of the CPU loop in src/optim/adam8bit.cpp, with the same rounding (_rn intrinsics
// keep nvcc from contracting into FMAs), so both give the same codes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../../include/tessera/optim/adam8bit_cuda.hpp"  // relative: builds with no -I
#include "../cuda_common/float_convert.cuh"

namespace tessera::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;

// The number of the 255 sorted midpoints below x: the nearest code (as quant::nearest_code).
__device__ __forceinline__ unsigned char nearest_code(const float* mid, float x) {
  int i = 0;
#pragma unroll
  for (int s = 128; s > 0; s >>= 1) i += mid[i + s - 1] < x ? s : 0;
  return static_cast<unsigned char>(i);
}

template <class P, class G>
__global__ void __launch_bounds__(kBlock)
    adam8bit_kernel(P* __restrict__ p, const G* __restrict__ g, std::uint8_t* __restrict__ m_codes,
                    std::uint8_t* __restrict__ v_codes, float* __restrict__ m_absmax, float* __restrict__ v_absmax,
                    const float* __restrict__ map_signed, const float* __restrict__ map_unsigned, std::int64_t n,
                    float b1, float b2, float eps_hat, float step_size, float decay) {
  __shared__ float smap[256], umap[256], smid[256], umid[256];
  __shared__ float warp_m[kWarps], warp_v[kWarps];
  const int t = threadIdx.x;
  smap[t] = map_signed[t];
  umap[t] = map_unsigned[t];
  __syncthreads();
  if (t < 255) {
    smid[t] = __fmul_rn(__fadd_rn(smap[t], smap[t + 1]), 0.5f);
    umid[t] = __fmul_rn(__fadd_rn(umap[t], umap[t + 1]), 0.5f);
  }

  const std::int64_t b = blockIdx.x;
  const std::int64_t i = b * kBlock + t;
  const bool valid = i < n;
  const float ma = m_absmax[b], va = v_absmax[b];
  float m = 0.0f, v = 0.0f;
  if (valid) {
    const float gi = to_float(g[i]);
    m = __fadd_rn(__fmul_rn(__fmul_rn(smap[m_codes[i]], ma), b1), __fmul_rn(1.0f - b1, gi));
    v = __fadd_rn(__fmul_rn(__fmul_rn(umap[v_codes[i]], va), b2), __fmul_rn(__fmul_rn(1.0f - b2, gi), gi));
    const float update = __fmul_rn(step_size, __fdiv_rn(m, __fadd_rn(__fsqrt_rn(v), eps_hat)));
    p[i] = from_float<P>(__fmul_rn(__fsub_rn(to_float(p[i]), update), decay));
  }

  // The block's new absmax: warp maxima by shuffles, then each thread folds the kWarps of them.
  float am = fabsf(m), av = v;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, off));
    av = fmaxf(av, __shfl_xor_sync(0xffffffffu, av, off));
  }
  if ((t & 31) == 0) {
    warp_m[t >> 5] = am;
    warp_v[t >> 5] = av;
  }
  __syncthreads();  // also publishes smid/umid
  float new_ma = 0.0f, new_va = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    new_ma = fmaxf(new_ma, warp_m[w]);
    new_va = fmaxf(new_va, warp_v[w]);
  }
  if (valid) {
    const float inv_m = new_ma > 0.0f ? __frcp_rn(new_ma) : 0.0f;
    const float inv_v = new_va > 0.0f ? __frcp_rn(new_va) : 0.0f;
    m_codes[i] = nearest_code(smid, __fmul_rn(m, inv_m));
    v_codes[i] = nearest_code(umid, __fmul_rn(v, inv_v));
  }
  if (t == 0) {  // every thread read the old absmax before the barrier above
    m_absmax[b] = new_ma;
    v_absmax[b] = new_va;
  }
}

template <class P, class G>
cudaError_t launch(void* p, const void* g, std::uint8_t* m_codes, std::uint8_t* v_codes, float* m_absmax,
                   float* v_absmax, const float* map_signed, const float* map_unsigned, std::int64_t n, float b1,
                   float b2, float eps_hat, float step_size, float decay, cudaStream_t stream) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  adam8bit_kernel<P, G><<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(
      static_cast<P*>(p), static_cast<const G*>(g), m_codes, v_codes, m_absmax, v_absmax, map_signed, map_unsigned, n,
      b1, b2, eps_hat, step_size, decay);
  return cudaGetLastError();
}

template <class P>
cudaError_t launch_for_grad(FloatType g_type, void* p, const void* g, std::uint8_t* m_codes, std::uint8_t* v_codes,
                            float* m_absmax, float* v_absmax, const float* map_signed, const float* map_unsigned,
                            std::int64_t n, float b1, float b2, float eps_hat, float step_size, float decay,
                            cudaStream_t stream) {
  switch (g_type) {
    case FloatType::f32:
      return launch<P, float>(p, g, m_codes, v_codes, m_absmax, v_absmax, map_signed, map_unsigned, n, b1, b2,
                              eps_hat, step_size, decay, stream);
    case FloatType::f16:
      return launch<P, __half>(p, g, m_codes, v_codes, m_absmax, v_absmax, map_signed, map_unsigned, n, b1, b2,
                               eps_hat, step_size, decay, stream);
    case FloatType::bf16:
      return launch<P, __nv_bfloat16>(p, g, m_codes, v_codes, m_absmax, v_absmax, map_signed, map_unsigned, n, b1,
                                      b2, eps_hat, step_size, decay, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

const char* adam8bit_cuda_step(void* p, FloatType p_type, const void* g, FloatType g_type, std::uint8_t* m_codes,
                               std::uint8_t* v_codes, float* m_absmax, float* v_absmax, const float* map_signed,
                               const float* map_unsigned, std::int64_t n, std::int64_t block, float b1, float b2,
                               float eps, float step_size, float bc2_sqrt, float decay, void* stream) {
  if (block != kBlock) return "adam8bit_cuda_step: block must be 256";
  if (n <= 0) return nullptr;
  if ((n + kBlock - 1) / kBlock > 0x7fffffff) return "adam8bit_cuda_step: too many blocks for one grid";
  const float eps_hat = eps * bc2_sqrt;  // as the CPU loop: fp32 product
  const auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err = cudaErrorInvalidValue;
  switch (p_type) {
    case FloatType::f32:
      err = launch_for_grad<float>(g_type, p, g, m_codes, v_codes, m_absmax, v_absmax, map_signed, map_unsigned, n, b1,
                                   b2, eps_hat, step_size, decay, s);
      break;
    case FloatType::f16:
      err = launch_for_grad<__half>(g_type, p, g, m_codes, v_codes, m_absmax, v_absmax, map_signed, map_unsigned, n,
                                    b1, b2, eps_hat, step_size, decay, s);
      break;
    case FloatType::bf16:
      err = launch_for_grad<__nv_bfloat16>(g_type, p, g, m_codes, v_codes, m_absmax, v_absmax, map_signed,
                                           map_unsigned, n, b1, b2, eps_hat, step_size, decay, s);
      break;
  }
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace tessera::cuda
