// ops::rope: tessera's CUDA kernel under one autograd node where it applies, else the op-by-op form.
#include "tessera/ops/rope.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "tessera/engine/target.hpp"

#ifdef TESSERA_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "tessera/ops/rope_cuda.hpp"
#endif

namespace tessera::ops {
namespace {

// (..., D) -> cat(-x[..., D/2:], x[..., :D/2])
at::Tensor rotate_half(const at::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

#ifdef TESSERA_WITH_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool kernel_takes(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const auto type = x.scalar_type();
  return kernel_target(x) == c10::DeviceType::CUDA && x.dim() == 4 && x.size(-1) % 2 == 0 &&
         (type == at::kFloat || type == at::kHalf || type == at::kBFloat16) && cos.scalar_type() == type &&
         sin.scalar_type() == type && cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == x.size(2) &&
         cos.size(1) == x.size(3) && cos.device() == x.device() && sin.device() == x.device();
}

cuda::FloatType float_type(c10::ScalarType type) {
  return type == at::kFloat ? cuda::FloatType::f32 : type == at::kHalf ? cuda::FloatType::f16 : cuda::FloatType::bf16;
}

// The kernel's output for x (forward) or the gradient (backward), nothing else allocated; on the meta device (a dry
// run) the output's allocation alone. Its memory is in (B, T, heads, D) order, as the family's q and k views of
// their projections and the op-by-op form's output (which follows that input's layout): SDPA's CUDA kernels give
// their output q's layout, so the attention output's (B, T, heads * D) view stays a view (a (B, heads, T, D)
// contiguous q cost a copy of it per layer, kept for the output projection), and the gradient reaches the
// projection without a copy.
at::Tensor launch(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool backward) {
  at::Tensor y = at::empty({x.size(0), x.size(2), x.size(1), x.size(3)}, x.options()).transpose(1, 2);
  if (x.is_meta() || y.numel() == 0) return y;
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xs = x.size(-1) == 1 || x.stride(-1) == 1 ? x : x.contiguous();
  const at::Tensor c = cos.contiguous(), s = sin.contiguous();
  const std::int64_t x_strides[3] = {xs.stride(0), xs.stride(1), xs.stride(2)};
  const std::int64_t y_strides[3] = {y.stride(0), y.stride(1), y.stride(2)};
  const char* error = cuda::rope_cuda(xs.const_data_ptr(), y.mutable_data_ptr(), c.const_data_ptr(), s.const_data_ptr(),
                                      float_type(x.scalar_type()), xs.size(0), xs.size(1), xs.size(2), xs.size(3),
                                      x_strides, y_strides, backward,
                                      at::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(error == nullptr, "rope: CUDA kernel launch failed: ", error);
  return y;
}

struct Rope : torch::autograd::Function<Rope> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return launch(x, cos, sin, /*backward=*/false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor dx = grads[0].defined() ? launch(grads[0], saved[0], saved[1], /*backward=*/true) : at::Tensor();
    return {dx, at::Tensor(), at::Tensor()};
  }
};
#endif

}  // namespace

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
#ifdef TESSERA_WITH_CUDA
  if (kernel_takes(x, cos, sin)) return Rope::apply(x, cos, sin);
#endif
  return x * cos + rotate_half(x) * sin;
}

}  // namespace tessera::ops
