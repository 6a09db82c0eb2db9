#pragma once
// defines: tessera::cuda::FloatType, the element types tessera's own CUDA kernels (src/*_cuda/*.cu) take, named
// without torch types so that the .cu files build without LibTorch's headers.

namespace tessera::cuda {

enum class FloatType : int { f32 = 0, f16 = 1, bf16 = 2 };

}  // namespace tessera::cuda
