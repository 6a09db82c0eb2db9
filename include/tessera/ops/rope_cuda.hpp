#pragma once
// defines: rope_cuda, the CUDA kernel of ops::rope (src/ops_cuda/rope_kernel.cu): rotary position embedding in one
// pass, each pair (x_j, x_{j+D/2}) of a row read once and its two outputs written once, the arithmetic in fp32 and
// rounded once. Plain C++ (no torch types), so the .cu file builds without LibTorch's headers.
#include <cstdint>

#include "../core/cuda_float_type.hpp"  // relative: the .cu file builds with no -I

namespace tessera::cuda {

// x: (b, heads, t, d) of `type` with element strides x_strides[0..2] and 1 (the last dimension dense); y: the same
// shape with strides y_strides[0..2] and 1, not overlapping x; cos, sin: (t, d) contiguous of `type`; d even. All
// device pointers.
//   forward:  y_j = x_j cos_j - x_{j+h} sin_j,    y_{j+h} = x_{j+h} cos_{j+h} + x_j sin_{j+h}    (h = d/2)
//   backward: y_j = x_j cos_j + x_{j+h} sin_{j+h}, y_{j+h} = x_{j+h} cos_{j+h} - x_j sin_j        (x: the gradient)
// stream: a cudaStream_t. Returns cudaGetErrorString of a failed launch, nullptr on success.
const char* rope_cuda(const void* x, void* y, const void* cos, const void* sin, FloatType type, std::int64_t b,
                      std::int64_t heads, std::int64_t t, std::int64_t d, const std::int64_t* x_strides,
                      const std::int64_t* y_strides, bool backward, void* stream);

}  // namespace tessera::cuda
