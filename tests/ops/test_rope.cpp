// ops/rope.hpp: the rotary embedding is transformers' apply_rotary_pos_emb (the pair formula that the CUDA kernel of
// ops/rope_cuda.hpp computes); on meta tensors for a CUDA target it allocates what the kernel's node does; on a CUDA
// device ([.cuda], run by bench/gpu/run.sh) the kernel equals the op-by-op form forward and backward.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include <string>

#include "support.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/ops/rope.hpp"

using namespace tessera;
using testing::max_rel_diff;

namespace {

// cos/sin of LlamaRotaryEmbedding for positions 0..t-1 and head size d (base 10000), (t, d)
std::pair<at::Tensor, at::Tensor> cos_sin(std::int64_t t, std::int64_t d, at::TensorOptions options) {
  const at::Tensor inv_freq = 1.0 / at::pow(10000.0, at::arange(0, d, 2, at::kDouble) / static_cast<double>(d));
  const at::Tensor freqs = at::outer(at::arange(t, at::kDouble), inv_freq);
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(options), emb.sin().to(options)};
}

// The op-by-op form, transformers' rotate_half and apply_rotary_pos_emb
at::Tensor reference(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const auto h = x.size(-1) / 2;
  return x * cos + at::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1) * sin;
}

}  // namespace

TEST_CASE("rope is transformers' apply_rotary_pos_emb, the kernel's pair formula, forward and backward", "[ops]") {
  at::manual_seed(7);
  const std::int64_t b = 2, heads = 3, t = 5, d = 8, h = d / 2;
  const auto [cos, sin] = cos_sin(t, d, at::TensorOptions().dtype(at::kDouble));
  // q as the family makes it: a (B, T, heads, D) view transposed to (B, heads, T, D)
  const at::Tensor x = at::randn({b, t, heads, d}, at::kDouble).transpose(1, 2).requires_grad_(true);
  const at::Tensor y = ops::rope(x, cos, sin);
  const at::Tensor lo = x.narrow(-1, 0, h), hi = x.narrow(-1, h, h);
  const at::Tensor c0 = cos.narrow(-1, 0, h), c1 = cos.narrow(-1, h, h), s0 = sin.narrow(-1, 0, h), s1 = sin.narrow(-1, h, h);
  CHECK(max_rel_diff(y.narrow(-1, 0, h), lo * c0 - hi * s0) < 1e-15);
  CHECK(max_rel_diff(y.narrow(-1, h, h), hi * c1 + lo * s1) < 1e-15);
  // backward: dx_j = g_j c_j + g_{j+h} s_{j+h}, dx_{j+h} = g_{j+h} c_{j+h} - g_j s_j
  const at::Tensor g = at::randn(y.sizes(), at::kDouble);
  y.backward(g);
  const at::Tensor g0 = g.narrow(-1, 0, h), g1 = g.narrow(-1, h, h);
  CHECK(max_rel_diff(x.grad().narrow(-1, 0, h), g0 * c0 + g1 * s1) < 1e-15);
  CHECK(max_rel_diff(x.grad().narrow(-1, h, h), g1 * c1 - g0 * s0) < 1e-15);
  CHECK(max_rel_diff(y, x) > 0.1);  // positions past 0 are rotated
}

#ifdef TESSERA_TEST_WITH_CUDA
TEST_CASE("rope on meta tensors for a CUDA target: the kernel's node, its output in q's memory order", "[ops]") {
  const auto meta = at::TensorOptions().device(at::kMeta).dtype(at::kBFloat16);
  const at::Tensor q = at::empty({2, 6, 4, 8}, meta).transpose(1, 2).requires_grad_(true);  // (2, 4, 6, 8)
  const at::Tensor cos = at::empty({6, 8}, meta), sin = at::empty({6, 8}, meta);
  const DryRunScope scope(0, 1, 1, c10::DeviceType::CUDA);
  const at::Tensor y = ops::rope(q, cos, sin);
  CHECK(y.sizes() == q.sizes());
  CHECK(y.transpose(1, 2).is_contiguous());  // (B, T, heads, D) memory, as q's view: SDPA's output follows it
  CHECK(std::string(y.grad_fn()->name()).find("Rope") != std::string::npos);
  y.backward(at::empty(y.sizes(), meta));
  CHECK(q.grad().sizes() == q.sizes());
  // cos and sin of another dtype are not the kernel's: the op-by-op form
  const at::Tensor wide = at::empty({6, 8}, meta.dtype(at::kFloat));
  CHECK(std::string(ops::rope(q, wide, wide).grad_fn()->name()).find("Rope") == std::string::npos);
}
#endif

// Hidden ([.cuda]): needs a CUDA device; bench/gpu/run.sh runs it by its tag.
TEST_CASE("rope's CUDA kernel equals the op-by-op form forward and backward", "[.cuda][ops]") {
  REQUIRE(at::hasCUDA());
  at::manual_seed(9);
  const std::int64_t b = 3, heads = 5, t = 37, d = 64;
  for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const auto options = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    const auto [cos, sin] = cos_sin(t, d, options);
    const at::Tensor base = at::randn({b, t, heads, d}, options);
    const at::Tensor x = base.transpose(1, 2).requires_grad_(true);  // strided, as the family's q and k
    const at::Tensor x_ref = base.to(at::kDouble).transpose(1, 2).requires_grad_(true);
    const at::Tensor y = ops::rope(x, cos, sin);
    const at::Tensor y_ref = reference(x_ref, cos.to(at::kDouble), sin.to(at::kDouble));
    const at::Tensor g = at::randn(y.sizes(), options);
    y.backward(g);
    y_ref.backward(g.to(at::kDouble));
    const double tol = dtype == at::kFloat ? 1e-6 : 1e-2;
    INFO("dtype " << dtype);
    CHECK(std::string(y.grad_fn()->name()).find("Rope") != std::string::npos);
    CHECK(y.transpose(1, 2).is_contiguous());
    CHECK(max_rel_diff(y.to(at::kDouble), y_ref) < tol);
    CHECK(max_rel_diff(x.grad().to(at::kDouble), x_ref.grad()) < tol);
  }
}
