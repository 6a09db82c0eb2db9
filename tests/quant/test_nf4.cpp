// NF4 quantization: the code table against its definition, round-trip error bounds, packing, storage,
// double quantization, and nf4_linear (forward and backward) against the dense reference.
// LibTorch before Catch2: glog's CHECK (pulled in by c10) must not replace Catch2's when built without the PCH.
#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/memory/counting_cpu_allocator.hpp"
#include "tessera/quant/nf4.hpp"

#include <catch2/catch.hpp>

using namespace tessera;
using namespace tessera::quant;

namespace {

// As tests/support.hpp (which pulls in all of tessera): max |a - b| / max |b| and ||a - b|| / ||b||.
double max_rel_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor da = a.detach().to(at::kDouble), db = b.detach().to(at::kDouble);
  return (da - db).abs().max().item<double>() / std::max(db.abs().max().item<double>(), 1e-12);
}
double rel_norm_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor da = a.detach().to(at::kDouble), db = b.detach().to(at::kDouble);
  return (da - db).norm().item<double>() / std::max(db.norm().item<double>(), 1e-300);
}

constexpr std::array<float, 16> kExpected = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};

// The largest half-gap between neighbouring table values (between -1 and -0.6961928).
constexpr double kMaxHalfGap = 0.15190359950065613;

// Inverse of the standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2, by bisection.
double norm_ppf(double p) {
  double lo = -40.0, hi = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

at::Tensor table_tensor() { return at::tensor(std::vector<float>(kExpected.begin(), kExpected.end())); }

// Reference per-block absmax (fp32, (nblocks,)) and codes (nearest table value by brute force) of w.
std::pair<at::Tensor, at::Tensor> reference_quantize(const at::Tensor& w, std::int64_t block) {
  const at::Tensor flat = w.reshape(-1).to(at::kFloat);
  const std::int64_t n = flat.numel(), nb = (n + block - 1) / block;
  const at::Tensor blocks = at::constant_pad_nd(flat, {0, nb * block - n}, 0).view({nb, block});
  const at::Tensor absmax = blocks.abs().amax({1});
  const at::Tensor x = (blocks * absmax.reciprocal().unsqueeze(1)).reshape(-1).slice(0, 0, n);
  const at::Tensor codes = (x.unsqueeze(1) - table_tensor().unsqueeze(0)).abs().argmin(1);
  return {absmax, codes};
}

// The 4-bit codes unpacked from q.codes (high nibble first), numel of them.
at::Tensor unpack(const Nf4Tensor& q) {
  const at::Tensor c = q.codes.to(at::kLong);
  return at::stack({c.div(16, "floor"), c.remainder(16)}, 1).reshape(-1).slice(0, 0, q.numel);
}

// The block scales a double-quantized tensor dequantizes with.
at::Tensor dq_absmax(const Nf4Tensor& q) { return dequantize_blockwise(q.absmax_q) + q.absmax_offset; }

}  // namespace

TEST_CASE("NF4 table is bitsandbytes' and the normal quantiles of QLoRA", "[quant]") {
  const std::span<const float, 16> v = nf4_values();
  for (std::size_t i = 0; i < 16; ++i) CHECK(v[i] == kExpected[i]);
  CHECK(v[7] == 0.0f);

  // bitsandbytes create_normal_map(offset=0.9677083): norm.ppf(linspace(offset, 0.5, 9)[:-1]),
  // -norm.ppf(linspace(offset, 0.5, 8)[:-1]) and 0, sorted and divided by the max.
  const double offset = 0.9677083;
  std::vector<double> d{0.0};
  for (int i = 0; i < 8; ++i) d.push_back(norm_ppf(offset + i * (0.5 - offset) / 8));
  for (int i = 0; i < 7; ++i) d.push_back(-norm_ppf(offset + i * (0.5 - offset) / 7));
  std::sort(d.begin(), d.end());
  const double max = d.back();
  double worst = 0;
  for (std::size_t i = 0; i < 16; ++i) worst = std::max(worst, std::abs(d[i] / max - v[i]));
  CHECK(worst < 1e-6);  // measured 1.1e-7: bitsandbytes takes the linspace in fp32
}

TEST_CASE("NF4 round trip of N(0, 0.02) weights", "[quant]") {
  at::manual_seed(11);
  const std::vector<std::vector<std::int64_t>> shapes = {{64, 64}, {33, 17}, {4097}, {256, 1000}};
  for (const auto& shape : shapes) {
    CAPTURE(shape);
    const at::Tensor w = at::randn(shape) * 0.02;
    const Nf4Tensor q = nf4_quantize(w, false);
    REQUIRE(q.shape == shape);
    REQUIRE(q.numel == w.numel());
    REQUIRE(q.codes.numel() == (w.numel() + 1) / 2);
    const auto [absmax, codes] = reference_quantize(w, 64);
    CHECK(at::equal(q.absmax, absmax));
    CHECK(at::equal(unpack(q), codes));

    const at::Tensor deq = nf4_dequantize(q, at::kFloat);
    REQUIRE(deq.sizes() == w.sizes());
    // |w - deq| <= absmax of the element's block * the largest half-gap of the table (+ fp32 rounding).
    const at::Tensor scale = absmax.repeat_interleave(64).slice(0, 0, w.numel()).view(shape);
    CHECK(((w - deq).abs() <= scale * (kMaxHalfGap + 1e-6)).all().item<bool>());
    const double rel = rel_norm_diff(deq, w);
    CHECK(rel < 0.1);  // measured 0.0895 .. 0.0919 here (0.088 .. 0.096 over other seeds)

    // The tensor-op path (used for CUDA tensors) gives the same bytes and values.
    const Nf4Tensor t = quant::detail::nf4_quantize_tensor_ops(w, false, 64);
    CHECK(at::equal(t.codes, q.codes));
    CHECK(at::equal(t.absmax, q.absmax));
    CHECK(at::equal(quant::detail::nf4_dequantize_tensor_ops(q, at::kFloat), deq));
    CHECK(at::equal(quant::detail::nf4_dequantize_tensor_ops(q, at::kBFloat16), deq.to(at::kBFloat16)));
  }
}

TEST_CASE("NF4 of reduced-precision and fp64 weights, dequantized to any float dtype", "[quant]") {
  at::manual_seed(12);
  const at::Tensor w = at::randn({48, 40}) * 0.02;
  for (const auto dtype : {at::kBFloat16, at::kHalf, at::kDouble}) {
    CAPTURE(dtype);
    const at::Tensor wd = w.to(dtype);
    const Nf4Tensor q = nf4_quantize(wd, false);
    const Nf4Tensor ref = nf4_quantize(wd.to(at::kFloat), false);
    CHECK(at::equal(q.codes, ref.codes));
    CHECK(at::equal(q.absmax, ref.absmax));
    const at::Tensor deq = nf4_dequantize(q, dtype);
    CHECK(deq.scalar_type() == dtype);
    CHECK(at::equal(deq, nf4_dequantize(q, at::kFloat).to(dtype)));
    const Nf4Tensor t = quant::detail::nf4_quantize_tensor_ops(wd, false, 64);
    CHECK(at::equal(t.codes, q.codes));
    CHECK(at::equal(quant::detail::nf4_dequantize_tensor_ops(q, dtype), deq));
  }
  // Non-contiguous weights quantize as their contiguous copies.
  const at::Tensor wt = w.t(), codes = nf4_quantize(wt.contiguous(), false).codes;
  CHECK(at::equal(nf4_quantize(wt, false).codes, codes));
  CHECK(at::equal(quant::detail::nf4_quantize_tensor_ops(wt, false, 64).codes, codes));
}

TEST_CASE("NF4 packing: table values land exactly, element 2i in the high nibble", "[quant]") {
  // 35 values in blocks of 8: codes (5i + 1) % 16, each block's first value +-1 (so absmax = its scale),
  // block 3 all zeros; the last block holds 3 values and the last byte's low nibble is padding (7, the code of
  // 0.0, as bitsandbytes pads).
  const std::int64_t n = 35, block = 8;
  const std::array<float, 5> scale = {0.5f, 1.5f, 3.0f, 0.0f, 0.02f};
  std::vector<int> code(n);
  std::vector<float> value(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t b = i / block;
    code[i] = b == 3 ? 7 : i % block == 0 ? (b % 2 ? 0 : 15) : static_cast<int>((5 * i + 1) % 16);
    value[i] = kExpected[code[i]] * scale[b];
  }
  const at::Tensor w = at::tensor(value);
  for (const bool ops_path : {false, true}) {
    CAPTURE(ops_path);
    const Nf4Tensor q =
        ops_path ? quant::detail::nf4_quantize_tensor_ops(w, false, block) : nf4_quantize(w, false, block);
    REQUIRE(q.codes.numel() == 18);
    REQUIRE(q.absmax.numel() == 5);
    for (int b = 0; b < 5; ++b) CHECK(q.absmax[b].item<float>() == scale[b]);
    const std::uint8_t* bytes = q.codes.data_ptr<std::uint8_t>();
    for (std::int64_t j = 0; j < 18; ++j) {
      const int hi = code[2 * j], lo = 2 * j + 1 < n ? code[2 * j + 1] : 7;
      CHECK(bytes[j] == (hi << 4 | lo));
    }
    CHECK(bytes[17] == (code[34] << 4 | 7));
    CHECK(at::equal(nf4_dequantize(q, at::kFloat), w));
    CHECK(at::equal(quant::detail::nf4_dequantize_tensor_ops(q, at::kFloat), w));
  }
}

TEST_CASE("NF4 storage: 0.5 + 4/64 bytes per parameter, less with double quantization", "[quant]") {
  at::manual_seed(13);
  const std::int64_t n = std::int64_t{1} << 20;
  const at::Tensor w = at::randn({1024, 1024}) * 0.02;
  const Nf4Tensor q = nf4_quantize(w, false);
  CHECK(q.bytes() == n / 2 + (n / 64) * 4);
  CHECK(static_cast<double>(q.bytes()) / n == 0.5 + 4.0 / 64);

  // codes n/2 + 8-bit absmax n/64 + its fp32 scales 4 * (n/64)/256 + the fp32 offset 4.
  const Nf4Tensor d = nf4_quantize(w, true);
  CHECK(d.double_quant);
  CHECK_FALSE(d.absmax.defined());
  CHECK(d.absmax_q.numel() == n / 64);
  CHECK(d.absmax_q.block == 256);
  CHECK(d.absmax_q.is_signed);
  CHECK(d.bytes() == n / 2 + n / 64 + 4 * (n / 64 / 256) + 4);
  CHECK(static_cast<double>(d.bytes()) / n == 0.5 + 1.0 / 64 + 4.0 / (64 * 256) + 4.0 / n);
  CHECK(d.bytes() < q.bytes());

  // A numel that is neither even nor a multiple of the blocks: ceil everywhere.
  const Nf4Tensor odd = nf4_quantize(at::randn({1001}), true);
  CHECK(odd.bytes() == 501 + 16 + 4 * 1 + 4);
}

TEST_CASE("NF4 double quantization stays close to single quantization", "[quant]") {
  at::manual_seed(14);
  const at::Tensor w = at::randn({256, 1000}) * 0.02;
  const Nf4Tensor s = nf4_quantize(w, false);
  const Nf4Tensor d = nf4_quantize(w, true);
  CHECK(at::equal(d.codes, s.codes));  // codes come from the exact absmax
  CHECK(d.absmax_offset == Approx(s.absmax.mean().item<float>()).epsilon(1e-6));
  // The 8-bit dynamic map spaces its top decade [0.1, 1] by ~0.014, so a block scale may move by
  // ~0.7% of the largest |absmax - offset| in its 256-block: ~0.4% of a typical absmax.
  const double scale_err = ((dq_absmax(d) - s.absmax).abs() / s.absmax).max().item<double>();
  CHECK(scale_err < 0.015);  // measured 0.0070 (largest per-block relative error)
  const at::Tensor ds = nf4_dequantize(s, at::kFloat), dd = nf4_dequantize(d, at::kFloat);
  CHECK(rel_norm_diff(dd, ds) < 0.004);  // measured 0.0021
  CHECK(rel_norm_diff(dd, w) < 0.1);
  CHECK(std::abs(rel_norm_diff(dd, w) - rel_norm_diff(ds, w)) < 1e-3);
  CHECK(at::equal(quant::detail::nf4_dequantize_tensor_ops(d, at::kFloat), dd));
}

TEST_CASE("nf4_linear equals the dense linear with the dequantized weight, forward and backward", "[quant]") {
  at::manual_seed(15);
  const at::Tensor w = at::randn({96, 128}) * 0.02;
  for (const bool dq : {false, true}) {
    CAPTURE(dq);
    const Nf4Tensor q = nf4_quantize(w, dq);
    const at::Tensor deq = nf4_dequantize(q, at::kFloat);
    const at::Tensor x = at::randn({3, 5, 128}).requires_grad_(true);
    const at::Tensor xr = x.detach().clone().requires_grad_(true);
    const at::Tensor gy = at::randn({3, 5, 96});

    const at::Tensor y = nf4_linear(x, q);
    const at::Tensor yr = at::linear(xr, deq);
    REQUIRE(y.sizes() == yr.sizes());
    CHECK(max_rel_diff(y, yr) < 1e-6);
    y.backward(gy);
    yr.backward(gy);
    REQUIRE(x.grad().defined());
    CHECK(max_rel_diff(x.grad(), xr.grad()) < 1e-6);
    CHECK_FALSE(q.codes.requires_grad());

    // Only x gets a gradient: no graph without a grad-requiring input.
    CHECK_FALSE(nf4_linear(x.detach(), q).requires_grad());
    {
      at::NoGradGuard no_grad;
      CHECK_FALSE(nf4_linear(x, q).requires_grad());
    }
  }
}

TEST_CASE("nf4_linear keeps no dequantized weight alive between forward and backward", "[quant]") {
  memory::install_counting_cpu_allocator();
  at::manual_seed(17);
  const Nf4Tensor q = nf4_quantize(at::randn({512, 1024}) * 0.02, false);
  const std::int64_t weight_bytes = 512 * 1024 * 4;
  const at::Tensor x = at::randn({4, 1024}).requires_grad_(true);
  const at::Tensor gy = at::randn({4, 512});
  auto live = [] { return memory::cpu_allocator_stats().allocated; };
  const std::int64_t base = live();
  at::Tensor y = nf4_linear(x, q);
  // Live after forward: y (8 KiB) and nothing of the 2 MiB weight.
  CHECK(live() - base == static_cast<std::int64_t>(y.nbytes()));
  y.backward(gy);
  y.reset();
  CHECK(live() - base == static_cast<std::int64_t>(x.grad().nbytes()));
  x.mutable_grad().reset();

  // The contrast: a dense linear of a temporary dequantized weight keeps it alive for backward.
  const std::int64_t base2 = live();
  at::Tensor yd = at::linear(x, nf4_dequantize(q, at::kFloat));
  CHECK(live() - base2 == static_cast<std::int64_t>(yd.nbytes()) + weight_bytes);
}

TEST_CASE("nf4_linear with bf16 inputs on the CPU", "[quant]") {
  at::manual_seed(16);
  const Nf4Tensor q = nf4_quantize(at::randn({64, 256}) * 0.02, true);
  const at::Tensor deq = nf4_dequantize(q, at::kFloat);
  const at::Tensor x32 = at::randn({4, 7, 256});
  const at::Tensor x = x32.to(at::kBFloat16).requires_grad_(true);
  const at::Tensor xr = x.detach().clone().requires_grad_(true);
  const at::Tensor gy32 = at::randn({4, 7, 64});
  const at::Tensor gy = gy32.to(at::kBFloat16);

  const at::Tensor y = nf4_linear(x, q);
  CHECK(y.scalar_type() == at::kBFloat16);
  const at::Tensor yr = at::linear(xr, deq.to(at::kBFloat16));
  CHECK(max_rel_diff(y, yr) < 1e-6);  // the same bf16 weight and GEMM: identical
  y.backward(gy);
  yr.backward(gy);
  CHECK(x.grad().scalar_type() == at::kBFloat16);
  CHECK(max_rel_diff(x.grad(), xr.grad()) < 1e-6);

  // Against fp32 throughout (x, W and the upstream grad only rounded to bf16): bf16 rounding, 2^-8.
  const at::Tensor xf = x.detach().to(at::kFloat);
  CHECK(max_rel_diff(y, at::linear(xf, deq)) < 1e-2);
  CHECK(max_rel_diff(x.grad(), at::matmul(gy.to(at::kFloat), deq)) < 1e-2);
}

TEST_CASE("nf4_linear through a widening Gemm is the widened dense linear, forward and backward", "[quant]") {
  // QLora's bf16 runs on a CPU without 16-bit GEMMs (cpu_lowp=widen): the dequantized weight's products widened.
  at::manual_seed(17);
  const ops::Gemm widen{ops::Lowp::widen};
  const Nf4Tensor q = nf4_quantize(at::randn({48, 128}) * 0.02, false);
  const at::Tensor w = nf4_dequantize(q, at::kBFloat16);
  const at::Tensor x = at::randn({3, 5, 128}).to(at::kBFloat16).requires_grad_(true);
  const at::Tensor xr = x.detach().clone().requires_grad_(true);
  const at::Tensor gy = at::randn({3, 5, 48}).to(at::kBFloat16);
  const at::Tensor y = nf4_linear(x, q, widen), yr = widen.linear(xr, w);
  CHECK(at::equal(y, yr));
  y.backward(gy);
  yr.backward(gy);
  CHECK(at::equal(x.grad(), xr.grad()));
  ops::take_widened_peak();
  nf4_linear(x.detach(), q, widen);
  CHECK(ops::take_widened_peak() > 0);  // the product was widened, not run by LibTorch's bf16 kernel
}

TEST_CASE("NF4 rejects bad input with tessera::Error", "[quant]") {
  const at::Tensor w = at::randn({8, 16});
  CHECK_THROWS_AS(nf4_quantize(at::ones({8, 16}, at::kInt), false), Error);
  CHECK_THROWS_AS(nf4_quantize(at::empty({0, 16}), false), Error);
  CHECK_THROWS_AS(nf4_quantize(w, false, 63), Error);
  CHECK_THROWS_AS(nf4_quantize(w, false, 0), Error);
  at::Tensor bad = w.clone();
  bad[3][5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(nf4_quantize(bad, false), Error);
  CHECK_THROWS_AS(quant::detail::nf4_quantize_tensor_ops(bad, false, 64), Error);
  bad[3][5] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(nf4_quantize(bad, true), Error);

  const Nf4Tensor q = nf4_quantize(w, false);
  CHECK_THROWS_AS(nf4_linear(at::randn({2, 8}), q), Error);                         // in_features 16
  CHECK_THROWS_AS(nf4_linear(at::ones({2, 16}, at::kLong), q), Error);               // not floating
  CHECK_THROWS_AS(nf4_linear(at::randn({2, 16}), nf4_quantize(at::randn({16}), false)), Error);  // 1-D
  CHECK_THROWS_AS(nf4_dequantize(q, at::kInt), Error);
  Nf4Tensor broken = q;
  broken.absmax = broken.absmax.slice(0, 0, 1);
  CHECK_THROWS_AS(nf4_dequantize(broken, at::kFloat), Error);
  broken.absmax = q.absmax.to(at::kDouble);
  CHECK_THROWS_AS(nf4_dequantize(broken, at::kFloat), Error);
  CHECK_THROWS_AS(Nf4Tensor{}.device(), Error);
}
