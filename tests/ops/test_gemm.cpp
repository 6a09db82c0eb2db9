// ops::Gemm: the widened path (bf16/fp16 operands multiplied in fp32, each result rounded once) against fp32
// autograd (attention: exact attention) on the same 16-bit values, forward and backward, for every product a family
// runs through it (linear layers, blocked when wide; attention with causal, grouped-query and boolean masks; batched matmul; the patch
// convolution); its fp32 copies transient and bounded, and counted on the meta device as on the CPU; fp32 operands
// and the native path untouched.
// LibTorch before Catch2: glog's CHECK (pulled in by c10) must not replace Catch2's when built without the PCH.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/ops/gemm.hpp"
#include "tessera/predict/dry_run.hpp"

#include <catch2/catch.hpp>

using namespace tessera;
using tessera::ops::Gemm;
using tessera::ops::Lowp;

namespace {

const Gemm widen{Lowp::widen};
const Gemm native{Lowp::native};

// The bits of precision of a 16-bit dtype's significand (implicit bit included).
int precision_bits(c10::ScalarType t) { return t == at::kBFloat16 ? 8 : 11; }

// True when every element of `got` (16-bit) is the fp32 value `want` rounded once: within half a unit in the last
// place of the 16-bit format (relative 2^-bits), plus 1e-6 of the largest magnitude for the order of the fp32 sums.
bool rounded_once(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.detach().to(at::kDouble), w = want.detach().to(at::kDouble);
  const double half_ulp = std::ldexp(1.0, -precision_bits(got.scalar_type()));
  const double slack = 1e-6 * w.abs().max().item<double>();
  const at::Tensor excess = (g - w).abs() - (w.abs() * half_ulp + slack);
  const double worst = excess.max().item<double>();
  if (worst > 0.0) {
    const auto at = excess.argmax().item<std::int64_t>();
    UNSCOPED_INFO("off by " << worst << " beyond the bound at element " << at << ": got "
                            << g.reshape(-1)[at].item<double>() << ", fp32 " << w.reshape(-1)[at].item<double>()
                            << " (largest magnitude " << w.abs().max().item<double>() << ")");
  }
  return got.scalar_type() != at::kFloat && worst <= 0.0;
}

// Leaves of dtype t with values exact in t, and their fp32 copies (the reference's leaves).
struct Leaf {
  at::Tensor low, wide;
};
Leaf leaf(std::vector<std::int64_t> shape, c10::ScalarType t, double scale = 1.0) {
  const at::Tensor low = (at::randn(shape) * scale).to(t).requires_grad_(true);
  return {low, low.detach().to(at::kFloat).requires_grad_(true)};
}

// Runs f on the 16-bit leaves and on their fp32 copies, back-propagates the same 16-bit gradient through both, and
// checks the output and every leaf's gradient are the fp32 ones rounded once.
void check_against_fp32(const std::vector<Leaf>& leaves,
                        const std::function<at::Tensor(const std::vector<at::Tensor>&)>& low_fn,
                        const std::function<at::Tensor(const std::vector<at::Tensor>&)>& wide_fn) {
  std::vector<at::Tensor> low, wide;
  for (const Leaf& l : leaves) {
    low.push_back(l.low);
    wide.push_back(l.wide);
  }
  const at::Tensor y = low_fn(low), y32 = wide_fn(wide);
  REQUIRE(y.scalar_type() == leaves[0].low.scalar_type());
  CHECK(rounded_once(y, y32));
  const at::Tensor g = at::randn(y.sizes()).to(y.scalar_type());
  y.backward(g);
  y32.backward(g.to(at::kFloat));
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    INFO("leaf " << i);
    REQUIRE(leaves[i].low.grad().defined());
    CHECK(leaves[i].low.grad().scalar_type() == leaves[i].low.scalar_type());
    CHECK(rounded_once(leaves[i].low.grad(), leaves[i].wide.grad()));
  }
}

}  // namespace

TEST_CASE("Gemm widen: a linear layer is the fp32 product rounded once, forward and backward", "[ops]") {
  at::manual_seed(1);
  for (const c10::ScalarType t : {at::kBFloat16, at::kHalf}) {
    INFO(c10::toString(t));
    const std::vector<Leaf> with_bias{leaf({3, 5, 24}, t), leaf({40, 24}, t, 0.2), leaf({40}, t)};
    check_against_fp32(
        with_bias, [](const auto& v) { return widen.linear(v[0], v[1], v[2]); },
        [](const auto& v) { return at::linear(v[0], v[1], v[2]); });
    const std::vector<Leaf> no_bias{leaf({7, 16}, t), leaf({9, 16}, t, 0.2)};
    check_against_fp32(
        no_bias, [](const auto& v) { return widen.linear(v[0], v[1]); },
        [](const auto& v) { return at::linear(v[0], v[1]); });
  }
}

TEST_CASE("Gemm widen: a weight wider than a block is widened block by block, to the same result", "[ops]") {
  // (2500, 8192) fp32 is 78 MiB; blocks of 32 MiB take 1024 rows: three blocks, the last of 452 rows.
  at::manual_seed(2);
  const std::vector<Leaf> leaves{leaf({2, 3, 8192}, at::kBFloat16), leaf({2500, 8192}, at::kBFloat16, 0.02),
                                 leaf({2500}, at::kBFloat16)};
  ops::take_widened_peak();
  check_against_fp32(
      leaves, [](const auto& v) { return widen.linear(v[0], v[1], v[2]); },
      [](const auto& v) { return at::linear(v[0], v[1], v[2]); });
  const std::int64_t whole_weight = 2500LL * 8192 * 4;
  const std::int64_t peak = ops::take_widened_peak();
  CHECK(peak > 1024LL * 8192 * 4);   // a block of weight rows was widened
  CHECK(peak < whole_weight * 6 / 10);  // never the whole weight (with the gradient block: ~33 MiB)
}

namespace {

// Attention in double on 16-bit q, k, v (B, H, L, E), k and v with H/groups heads, an additive mask broadcastable to
// (B, H, L, S), and its gradients for the upstream gradient dout, written out as the CPU kernels compute them:
// P = softmax(scale q k^T + mask), out = P v; dv = P^T dout; dS = P (dout v^T - D) with D = rowsum(dout * out16),
// out16 being the output in the 16-bit dtype (the kernels, native or widened, keep only that); dq = scale dS k,
// dk = scale dS^T q, both heads of a group adding into their key/value head.
struct AttentionRef {
  at::Tensor out, dq, dk, dv;
};
AttentionRef attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                 double scale, const at::Tensor& dout) {
  const std::int64_t groups = q.size(1) / k.size(1);
  auto d = [](const at::Tensor& t) { return t.detach().to(at::kDouble); };
  const at::Tensor kk = d(k).repeat_interleave(groups, 1), vv = d(v).repeat_interleave(groups, 1);
  const at::Tensor p = at::softmax(at::matmul(d(q), kk.transpose(-2, -1)) * scale + d(mask), -1);
  const at::Tensor out = at::matmul(p, vv), g = d(dout);
  const at::Tensor rounded_out = d(out.to(q.scalar_type()));
  const at::Tensor ds = p * (at::matmul(g, vv.transpose(-2, -1)) - (g * rounded_out).sum(-1, true));
  auto fold = [&](const at::Tensor& t) {
    return t.view({t.size(0), k.size(1), groups, t.size(2), t.size(3)}).sum(2);
  };
  return {out, at::matmul(ds, kk) * scale, fold(at::matmul(ds.transpose(-2, -1), d(q)) * scale),
          fold(at::matmul(p.transpose(-2, -1), g))};
}

void check_attention(c10::ScalarType t, std::vector<std::int64_t> q_shape, std::int64_t kv_heads,
                     const std::optional<at::Tensor>& mask, bool causal, std::optional<double> scale) {
  std::vector<std::int64_t> kv_shape = q_shape;
  kv_shape[1] = kv_heads;
  const at::Tensor q = at::randn(q_shape).to(t).requires_grad_(true);
  const at::Tensor k = at::randn(kv_shape).to(t).requires_grad_(true);
  const at::Tensor v = at::randn(kv_shape).to(t).requires_grad_(true);
  const at::Tensor y = widen.attention(q, k, v, mask, causal, scale, kv_heads != q_shape[1]);
  const at::Tensor dout = at::randn(y.sizes()).to(t);
  y.backward(dout);
  const std::int64_t l = q_shape[2];
  at::Tensor additive = at::zeros({l, l}, at::kDouble);
  if (causal) additive = additive.masked_fill(at::ones({l, l}, at::kBool).triu(1), -INFINITY);
  if (mask) additive = additive + at::zeros(mask->sizes(), at::kDouble).masked_fill(mask->logical_not(), -INFINITY);
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q_shape[3])));
  const AttentionRef ref = attention_reference(q, k, v, additive, s, dout);
  CHECK(rounded_once(y, ref.out));
  CHECK(rounded_once(q.grad(), ref.dq));
  CHECK(rounded_once(k.grad(), ref.dk));
  CHECK(rounded_once(v.grad(), ref.dv));
}

}  // namespace

TEST_CASE("Gemm widen: attention is exact attention rounded once (causal, grouped-query, masked, scaled)", "[ops]") {
  at::manual_seed(3);
  // A boolean mask (B, 1, L, S): causal, one padded key (each row keeps its own position), as OPT's padding mask.
  const at::Tensor allowed = at::ones({2, 1, 5, 5}, at::kBool).tril().logical_and(
      at::tensor({1, 1, 1, 1, 0}).to(at::kBool).view({1, 1, 1, 5}).logical_or(at::eye(5, at::kBool).view({1, 1, 5, 5})));
  for (const c10::ScalarType t : {at::kBFloat16, at::kHalf}) {
    INFO(c10::toString(t));
    check_attention(t, {2, 4, 6, 8}, 2, std::nullopt, true, std::nullopt);  // causal, 4 query heads on 2 (GQA)
    check_attention(t, {2, 3, 5, 4}, 3, allowed, false, 1.0);                // masked, scale 1 (OPT)
    check_attention(t, {3, 2, 7, 8}, 2, std::nullopt, false, std::nullopt);  // neither (ViT, BLIP-2)
  }
}

TEST_CASE("Gemm widen: batched matmul and the patch convolution are fp32 products rounded once", "[ops]") {
  at::manual_seed(4);
  check_against_fp32(
      {leaf({2, 3, 5, 8}, at::kBFloat16), leaf({2, 3, 8, 6}, at::kBFloat16)},
      [](const auto& v) { return widen.matmul(v[0], v[1]); }, [](const auto& v) { return at::matmul(v[0], v[1]); });
  check_against_fp32(
      {leaf({2, 3, 16, 16}, at::kBFloat16), leaf({8, 3, 4, 4}, at::kBFloat16, 0.2), leaf({8}, at::kBFloat16)},
      [](const auto& v) { return widen.conv2d(v[0], v[1], v[2], 4); },
      [](const auto& v) { return at::conv2d(v[0], v[1], v[2], {4, 4}); });
}

TEST_CASE("Gemm widen: a frozen weight gets no gradient and its product none computed", "[ops]") {
  const at::Tensor x = at::randn({4, 8}).to(at::kBFloat16).requires_grad_(true);
  const at::Tensor w = at::randn({6, 8}).to(at::kBFloat16);  // frozen: no requires_grad
  widen.linear(x, w).sum().backward();
  CHECK(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("Gemm widen: no fp32 copy outlives a product, and the graph saves the 16-bit operands", "[ops]") {
  at::manual_seed(5);
  const at::Tensor x = at::randn({64, 256}).to(at::kBFloat16).requires_grad_(true);
  const at::Tensor w = at::randn({512, 256}).to(at::kBFloat16).requires_grad_(true);
  ops::take_widened_peak();
  at::Tensor y = widen.linear(x, w);
  CHECK(ops::widened_live_bytes() == 0);
  // x, W and y in fp32 at once: (64*256 + 512*256 + 64*512) * 4 bytes.
  CHECK(ops::take_widened_peak() == (64 * 256 + 512 * 256 + 64 * 512) * 4);
  y.sum().backward();
  CHECK(ops::widened_live_bytes() == 0);
  CHECK(ops::take_widened_peak() > 0);
  CHECK(ops::take_widened_peak() == 0);  // a new interval starts at the live bytes
}

TEST_CASE("Gemm widen on the meta device counts the copies the CPU makes (what a dry run predicts)", "[ops]") {
  predict::register_meta_kernels();  // the CPU attention kernel's meta kernel, as a dry run has it
  auto run = [](c10::Device device) {
    const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(device);
    const at::Tensor x = at::empty({2, 16, 64}, opts).requires_grad_(true);
    const at::Tensor w = at::empty({96, 64}, opts).requires_grad_(true);
    const at::Tensor q = at::empty({2, 4, 16, 16}, opts).requires_grad_(true);
    ops::take_widened_peak();
    widen.linear(x, w).sum().backward();
    const std::int64_t linear = ops::take_widened_peak();
    widen.attention(q, q, q, std::nullopt, true).sum().backward();
    return std::pair{linear, ops::take_widened_peak()};
  };
  const auto cpu = run(c10::Device(c10::kCPU));
  const auto meta = run(c10::Device(c10::kMeta));
  CHECK(cpu.first > 0);
  CHECK(meta == cpu);
}

TEST_CASE("Gemm: fp32 operands and the native path are LibTorch's own products, bit for bit", "[ops]") {
  at::manual_seed(6);
  const at::Tensor x = at::randn({3, 4, 16}), w = at::randn({8, 16}), b = at::randn({8});
  CHECK(at::equal(widen.linear(x, w, b), at::linear(x, w, b)));
  const at::Tensor xb = x.to(at::kBFloat16), wb = w.to(at::kBFloat16);
  CHECK(at::equal(native.linear(xb, wb), at::linear(xb, wb)));
  const at::Tensor q = at::randn({1, 2, 5, 4}).to(at::kBFloat16);
  CHECK(at::equal(native.attention(q, q, q, std::nullopt, true),
                  at::scaled_dot_product_attention(q, q, q, {}, 0.0, true)));
  CHECK(widen.widens(xb));
  CHECK_FALSE(widen.widens(x));
  CHECK_FALSE(native.widens(xb));
}

TEST_CASE("Gemm widen: operands of two dtypes or unequal batches are refused, naming them", "[ops]") {
  const at::Tensor x = at::randn({2, 8}).to(at::kBFloat16);
  CHECK_THROWS_WITH(widen.linear(x, at::randn({4, 8})),
                    Catch::Contains("BFloat16 and Float") && Catch::Contains("cast them to one dtype"));
  CHECK_THROWS_WITH(widen.matmul(at::randn({2, 3, 4}).to(at::kBFloat16), at::randn({3, 4, 5}).to(at::kBFloat16)),
                    Catch::Contains("[2, 3, 4]") && Catch::Contains("same batch dimensions"));
  const at::Tensor q = at::randn({1, 3, 4, 8}).to(at::kBFloat16), k = at::randn({1, 2, 4, 8}).to(at::kBFloat16);
  CHECK_THROWS_WITH(widen.attention(q, k, k, std::nullopt, false, std::nullopt, true), Catch::Contains("dividing H"));
}
