#include "tessera/models/ops.hpp"

#include <ATen/ATen.h>

namespace tessera::ops {
namespace {

bool emulate_half(const at::Tensor& t) { return t.is_cpu() && t.scalar_type() == at::kHalf; }

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight) {
  if (emulate_half(x)) return at::linear(x.to(at::kFloat), weight.to(at::kFloat)).to(at::kHalf);
  return at::linear(x, weight);
}

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  if (emulate_half(a)) return at::matmul(a.to(at::kFloat), b.to(at::kFloat)).to(at::kHalf);
  return at::matmul(a, b);
}

at::Tensor silu(const at::Tensor& x) {
  if (emulate_half(x)) return at::silu(x.to(at::kFloat)).to(at::kHalf);
  return at::silu(x);
}

}  // namespace tessera::ops
