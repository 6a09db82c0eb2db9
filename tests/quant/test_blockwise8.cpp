// The dynamic maps, block-wise 8-bit quantization error bounds, and the CPU loops against the tensor ops.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "tessera/quant/blockwise8.hpp"

using namespace tessera::quant;

namespace {

// The largest distance between neighbouring codes of a sorted map.
float largest_gap(const at::Tensor& map) { return (map.slice(0, 1) - map.slice(0, 0, -1)).max().item<float>(); }

// The absmax of each element's block, one per element.
at::Tensor block_absmax(const at::Tensor& x, std::int64_t block) {
  const std::int64_t n = x.numel(), nb = (n + block - 1) / block;
  const at::Tensor padded = at::constant_pad_nd(x, {0, nb * block - n}).view({nb, block});
  return padded.abs().amax(1);
}

}  // namespace

TEST_CASE("The signed dynamic map is bitsandbytes' create_dynamic_map(True)", "[quant]") {
  const at::Tensor map = dynamic_map(true);
  REQUIRE(map.scalar_type() == at::kFloat);
  REQUIRE(map.is_cpu());
  REQUIRE(map.numel() == 256);
  const float* m = map.data_ptr<float>();
  CHECK((map.slice(0, 1) > map.slice(0, 0, -1)).all().item<bool>());  // sorted, 256 distinct values
  // 127 negative codes, 0 at index 127, 127 positive means and 1.0 at the top.
  CHECK(m[127] == 0.0f);
  CHECK(m[255] == 1.0f);
  CHECK((map < 0).sum().item<std::int64_t>() == 127);
  CHECK(at::equal(map.slice(0, 128, 255), -map.slice(0, 0, 127).flip(0)));  // symmetric but for 1.0
  // Exponent i (scale 10^(i-6)) has 2^i means of linspace(0.1, 1, 2^i + 1) on each side.
  for (int i = 0; i < 7; ++i) {
    const double lo = std::pow(10.0, i - 7), hi = std::pow(10.0, i - 6);
    CHECK(((map > lo) & (map < hi)).sum().item<std::int64_t>() == (std::int64_t{1} << i));
  }
  // The smallest positive code: 1e-6 * (0.1 + 1) / 2; the largest mean: (1 - 0.9/64 + 1) / 2.
  CHECK(m[128] == Approx(5.5e-7).epsilon(1e-6));
  CHECK(m[254] == Approx(0.99296875).epsilon(1e-6));
  CHECK(m[0] == -m[254]);
  // Neighbouring means of linspace(0.1, 1, 65) lie 0.9/64 apart: the largest gap.
  CHECK(largest_gap(map) == Approx(0.9 / 64).epsilon(1e-4));
  CHECK(&dynamic_map(true) == &dynamic_map(true));  // built once
}

TEST_CASE("The unsigned dynamic map is bitsandbytes' create_dynamic_map(False)", "[quant]") {
  const at::Tensor map = dynamic_map(false);
  REQUIRE(map.numel() == 256);
  const float* m = map.data_ptr<float>();
  CHECK((map.slice(0, 1) > map.slice(0, 0, -1)).all().item<bool>());
  CHECK(m[0] == 0.0f);
  CHECK(m[255] == 1.0f);
  CHECK((map >= 0).all().item<bool>());
  // Exponent i has 2^(i+1) means of linspace(0.1, 1, 2^(i+1) + 1).
  for (int i = 0; i < 7; ++i) {
    const double lo = std::pow(10.0, i - 7), hi = std::pow(10.0, i - 6);
    CHECK(((map > lo) & (map < hi)).sum().item<std::int64_t>() == (std::int64_t{2} << i));
  }
  // linspace(0.1, 1, 3) = {0.1, 0.55, 1}: smallest code 1e-6 * 0.325; largest mean 1 - 0.9/256.
  CHECK(m[1] == Approx(3.25e-7).epsilon(1e-6));
  CHECK(m[2] == Approx(7.75e-7).epsilon(1e-6));
  CHECK(m[254] == Approx(1.0 - 0.9 / 256).epsilon(1e-6));
  CHECK(largest_gap(map) == Approx(0.9 / 128).epsilon(1e-4));
}

TEST_CASE("nearest_code picks the nearest code of the map", "[quant]") {
  for (bool is_signed : {true, false}) {
    const at::Tensor map = dynamic_map(is_signed);
    const float* m = map.data_ptr<float>();
    const float* mid = dynamic_map_midpoints(is_signed).data_ptr<float>();
    int self = 0;
    for (int k = 0; k < 256; ++k) self += nearest_code(mid, m[k]) == k;
    CHECK(self == 256);  // every code maps to itself
    at::manual_seed(1);
    const at::Tensor x = at::rand({20000}) * (is_signed ? 2.2 : 1.1) - (is_signed ? 1.1 : 0.0);
    const at::Tensor brute = (x.unsqueeze(1) - map.unsqueeze(0)).abs().argmin(1);
    const float* xs = x.data_ptr<float>();
    const std::int64_t* expected = brute.data_ptr<std::int64_t>();
    std::int64_t farther = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const int got = nearest_code(mid, xs[i]);
      // Equal, or a tie within fp32 rounding of the midpoint.
      farther += got != expected[i] && std::abs(xs[i] - m[got]) > std::abs(xs[i] - m[expected[i]]) + 1e-7f;
    }
    CHECK(farther == 0);
  }
}

TEST_CASE("dynamic_code_lookup gives nearest_code's codes", "[quant]") {
  // Exhaustively over all non-NaN floats when written; here the edges of every table bucket and the
  // floats next to every midpoint.
  for (bool is_signed : {true, false}) {
    const float* mid = dynamic_map_midpoints(is_signed).data_ptr<float>();
    const CodeLookup& lookup = dynamic_code_lookup(is_signed);
    std::int64_t tried = 0, differ = 0;
    auto compare = [&](float x) {
      ++tried;
      differ += !std::isnan(x) && lookup(x) != nearest_code(mid, x);
    };
    for (std::uint32_t top = 0; top < 65536; ++top) {
      for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0xfffeu, 0xffffu}) {
        const std::uint32_t bits = (top << 16) | low;
        float x;
        std::memcpy(&x, &bits, sizeof x);
        compare(x);
      }
    }
    for (int k = 0; k < 255; ++k) {
      compare(mid[k]);
      compare(std::nextafter(mid[k], -2.0f));
      compare(std::nextafter(mid[k], 2.0f));
    }
    CHECK(tried == 65536 * 6 + 255 * 3);
    CHECK(differ == 0);
  }
}

TEST_CASE("quantize_blockwise: error within half the largest code gap of each block's absmax", "[quant]") {
  at::manual_seed(7);
  const std::int64_t n = 100003;  // not a multiple of the block
  for (bool is_signed : {true, false}) {
    for (std::int64_t block : {256, 64}) {
      const at::Tensor x = is_signed ? at::randn({n}) * 3.0 : at::randn({n}).square();
      const Blockwise8 q = quantize_blockwise(x, is_signed, block);
      REQUIRE(q.codes.scalar_type() == at::kByte);
      REQUIRE(q.codes.numel() == n);
      REQUIRE(q.absmax.numel() == (n + block - 1) / block);
      CHECK(q.bytes() == n + 4 * q.absmax.numel());
      // absmax is stored exactly.
      const at::Tensor amax = block_absmax(x, block);
      CHECK(at::equal(q.absmax, amax));
      const at::Tensor deq = dequantize_blockwise(q);
      REQUIRE(deq.sizes() == x.sizes());
      const at::Tensor scale = amax.repeat_interleave(block).slice(0, 0, n);
      // |x - deq| <= absmax * gap/2, plus fp32 rounding of x/absmax and of code*absmax.
      const double half_gap = largest_gap(dynamic_map(is_signed)) / 2.0;
      const at::Tensor err = (x.to(at::kDouble) - deq.to(at::kDouble)).abs();
      CHECK((err <= scale.to(at::kDouble) * (half_gap + 1e-6)).all().item<bool>());
      // Looser, stated bounds: relative error at most 7.1% where |x| >= absmax/10 (gap 0.9/64 there), and
      // the whole buffer within 2% in the Frobenius norm.
      const at::Tensor big = x.abs() >= scale / 10;
      CHECK((err.masked_select(big) <= 0.071 * x.abs().to(at::kDouble).masked_select(big)).all().item<bool>());
      CHECK((deq - x).norm().item<double>() / x.norm().item<double>() < 0.02);
      // The largest value of each block is a code times its absmax: exact.
      const at::Tensor at_max = x == scale;
      CHECK(at::equal(deq.masked_select(at_max), x.masked_select(at_max)));
    }
  }
}

TEST_CASE("quantize_blockwise: zeros round-trip exactly, an all-zero block has absmax 0", "[quant]") {
  at::Tensor x = at::randn({1000});
  x.slice(0, 256, 512).zero_();                   // one whole block of zeros
  x.slice(0, 600, 1000).masked_fill_(at::rand({400}) < 0.5, 0.0);  // scattered zeros
  for (bool is_signed : {true, false}) {
    const at::Tensor input = is_signed ? x : x.abs();
    const Blockwise8 q = quantize_blockwise(input, is_signed);
    CHECK(q.absmax[1].item<float>() == 0.0f);
    const at::Tensor deq = dequantize_blockwise(q);
    const at::Tensor zeros = input == 0;
    CHECK(zeros.sum().item<std::int64_t>() > 256);
    CHECK((deq.masked_select(zeros) == 0).all().item<bool>());
    CHECK((q.codes.masked_select(zeros) == (is_signed ? 127 : 0)).all().item<bool>());
  }
  const Blockwise8 empty = quantize_blockwise(at::zeros({0}), true);
  CHECK(empty.codes.numel() == 0);
  CHECK(empty.absmax.numel() == 0);
  CHECK(dequantize_blockwise(empty).numel() == 0);
}

TEST_CASE("quantize_blockwise: the CPU loops equal the tensor ops used for CUDA tensors", "[quant]") {
  at::manual_seed(11);
  for (bool is_signed : {true, false}) {
    at::Tensor x = at::randn({70001});
    if (!is_signed) x = x.abs();
    x.slice(0, 512, 768).zero_();
    const Blockwise8 loop = quantize_blockwise(x, is_signed);
    const Blockwise8 ops = tessera::quant::detail::quantize_blockwise_tensor_ops(x, is_signed, 256);
    CHECK(at::equal(loop.codes, ops.codes));
    CHECK(at::equal(loop.absmax, ops.absmax));
    CHECK(at::equal(dequantize_blockwise(loop), tessera::quant::detail::dequantize_blockwise_tensor_ops(loop)));
  }
  // Other input dtypes are widened to fp32 first.
  const at::Tensor h = at::randn({3000}).to(at::kBFloat16);
  CHECK(at::equal(quantize_blockwise(h, true).codes, quantize_blockwise(h.to(at::kFloat), true).codes));
}
