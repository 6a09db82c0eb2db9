#pragma once
// defines: adam8bit_cuda_step, the fused CUDA kernel of Adam8bit (src/optim_cuda/adam8bit_kernel.cu) on one
// 8-bit span: one thread block per 256-value block dequantizes m and v, updates them and the parameters in
// fp32, reduces the new absmax and requantizes (binary search in the maps, held in shared memory).
// Plain C++ (no torch types), so the .cu file builds without LibTorch's headers.
#include <cstdint>

#include "../core/cuda_float_type.hpp"  // relative: the .cu file builds with no -I

namespace tessera::cuda {

// p: n params of p_type; g: n grads of g_type; m_codes/v_codes: n codes; m_absmax/v_absmax: ceil(n/block)
// values; map_signed/map_unsigned: the 256-entry dynamic maps; all device pointers. block must be 256.
// The update: m, v as Adam; p <- (p - step_size * m / (sqrt(v) + bc2_sqrt*eps)) * decay with
// step_size = lr * bc2_sqrt / bc1, bc2_sqrt = sqrt(1 - b2^t), decay = 1 - lr*wd (bitsandbytes' form).
// stream: a cudaStream_t. Returns cudaGetErrorString of a failed launch, nullptr on success.
const char* adam8bit_cuda_step(void* p, FloatType p_type, const void* g, FloatType g_type, std::uint8_t* m_codes,
                               std::uint8_t* v_codes, float* m_absmax, float* v_absmax, const float* map_signed,
                               const float* map_unsigned, std::int64_t n, std::int64_t block, float b1, float b2,
                               float eps, float step_size, float bc2_sqrt, float decay, void* stream);

}  // namespace tessera::cuda
