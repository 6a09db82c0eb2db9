// Block-wise 8-bit quantization (bitsandbytes' dynamic map, quantize_blockwise, dequantize_blockwise):
// multi-threaded loops for CPU tensors, tensor ops for the others.
#include "tessera/quant/blockwise8.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/core/parallel.hpp"

namespace tessera::quant {
namespace {

// bitsandbytes' create_dynamic_map(signed, max_exponent_bits=7, total_bits=8), with its float32 tensor
// ops (torch.linspace, means of neighbours, the scale applied as an fp32 scalar), so the codes are the
// same fp32 values.
at::Tensor make_dynamic_map(bool is_signed) {
  constexpr int max_exponent_bits = 7, total_bits = 8;
  constexpr int non_sign_bits = total_bits - 1;  // bitsandbytes: total_bits - (1 if signed else 1)
  std::vector<at::Tensor> parts;
  auto add = [&](std::int64_t fraction_items, double scale) {
    const at::Tensor boundaries = at::linspace(0.1, 1.0, fraction_items, at::TensorOptions().dtype(at::kFloat));
    const at::Tensor means = (boundaries.slice(0, 0, -1) + boundaries.slice(0, 1)) / 2.0;
    parts.push_back(means * scale);
    if (is_signed) parts.push_back(means * -scale);
  };
  for (int i = 0; i < max_exponent_bits; ++i) {
    const std::int64_t fraction_items = is_signed ? (std::int64_t{1} << (i + non_sign_bits - max_exponent_bits)) + 1
                                                  : (std::int64_t{1} << (i + non_sign_bits - max_exponent_bits + 1)) + 1;
    add(fraction_items, std::pow(10.0, -(max_exponent_bits - 1) + i));
  }
  // additional_items = 2**(non_sign_bits - max_exponent_bits) - 1 = 0 for 7 exponent bits of 8.
  at::Tensor data = at::cat(parts);
  data = at::cat({data, at::tensor({0.0f, 1.0f})});
  if (data.numel() < 256) data = at::cat({data, at::zeros({256 - data.numel()})});
  TORCH_CHECK(data.numel() == 256, "dynamic_map: ", data.numel(), " codes, not 256");
  return std::get<0>(data.sort());
}

at::Tensor make_midpoints(const at::Tensor& map) {
  const float* m = map.data_ptr<float>();
  at::Tensor mid = at::empty({255}, at::kFloat);
  float* out = mid.data_ptr<float>();
  for (int k = 0; k < 255; ++k) out[k] = (m[k] + m[k + 1]) * 0.5f;
  return mid;
}

struct LookupStorage {
  std::vector<std::uint8_t> table;
  std::vector<float> midpoints;
  CodeLookup lookup;
};

LookupStorage make_lookup(bool is_signed) {
  LookupStorage s;
  const float* mid = dynamic_map_midpoints(is_signed).data_ptr<float>();
  s.midpoints.assign(mid, mid + 255);
  s.midpoints.push_back(std::numeric_limits<float>::infinity());
  s.table.resize(65536);
  for (std::uint32_t top = 0; top < 65536; ++top) {
    // The bucket's lowest and highest values: magnitudes grow with the low bits, so negative buckets flip.
    const bool negative = (top & 0x8000u) != 0;
    const std::uint32_t small = top << 16, large = (top << 16) | 0xffffu;
    float lo, hi;
    const std::uint32_t lo_bits = negative ? large : small, hi_bits = negative ? small : large;
    std::memcpy(&lo, &lo_bits, sizeof lo);
    std::memcpy(&hi, &hi_bits, sizeof hi);
    const int base = nearest_code(mid, lo);
    TORCH_CHECK(std::isnan(lo) || std::isnan(hi) || nearest_code(mid, hi) - base <= 2,
                "dynamic_code_lookup: more than two midpoints in bucket ", top);
    s.table[top] = static_cast<std::uint8_t>(base);
  }
  s.lookup = CodeLookup{s.table.data(), s.midpoints.data()};
  return s;
}

std::int64_t num_blocks(std::int64_t n, std::int64_t block) { return (n + block - 1) / block; }

void check_block(std::int64_t block) { TORCH_CHECK(block > 0, "quantize_blockwise: block must be positive, got ", block); }

}  // namespace

const at::Tensor& dynamic_map(bool is_signed) {
  static const at::Tensor signed_map = make_dynamic_map(true);
  static const at::Tensor unsigned_map = make_dynamic_map(false);
  return is_signed ? signed_map : unsigned_map;
}

const at::Tensor& dynamic_map_midpoints(bool is_signed) {
  static const at::Tensor signed_mid = make_midpoints(dynamic_map(true));
  static const at::Tensor unsigned_mid = make_midpoints(dynamic_map(false));
  return is_signed ? signed_mid : unsigned_mid;
}

const CodeLookup& dynamic_code_lookup(bool is_signed) {
  static const LookupStorage signed_lookup = make_lookup(true);
  static const LookupStorage unsigned_lookup = make_lookup(false);
  return is_signed ? signed_lookup.lookup : unsigned_lookup.lookup;
}

std::int64_t Blockwise8::bytes() const {
  auto nbytes = [](const at::Tensor& t) { return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0; };
  return nbytes(codes) + nbytes(absmax);
}

Blockwise8 quantize_blockwise(const at::Tensor& x, bool is_signed, std::int64_t block) {
  check_block(block);
  if (!x.is_cpu()) return detail::quantize_blockwise_tensor_ops(x, is_signed, block);
  at::NoGradGuard no_grad;
  const at::Tensor xf = x.detach().reshape(-1).to(at::kFloat).contiguous();
  const std::int64_t n = xf.numel(), nb = num_blocks(n, block);
  Blockwise8 q{at::empty({n}, at::kByte), at::empty({nb}, at::kFloat), block, is_signed};
  const float* src = xf.data_ptr<float>();
  const CodeLookup& nearest = dynamic_code_lookup(is_signed);
  std::uint8_t* codes = q.codes.data_ptr<std::uint8_t>();
  float* absmax = q.absmax.data_ptr<float>();
  tessera::parallel_for(0, nb, std::max<std::int64_t>(1, 32768 / block), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t begin = b * block, end = std::min(n, begin + block);
      float amax = 0.0f;
      for (std::int64_t i = begin; i < end; ++i) amax = std::max(amax, std::abs(src[i]));
      absmax[b] = amax;
      // As bitsandbytes: x times the reciprocal of absmax. An all-zero block maps to the code of 0.
      const float inv = amax > 0.0f ? 1.0f / amax : 0.0f;
      for (std::int64_t i = begin; i < end; ++i) codes[i] = nearest(src[i] * inv);
    }
  });
  return q;
}

at::Tensor dequantize_blockwise(const Blockwise8& q) {
  TORCH_CHECK(q.codes.defined() && q.codes.scalar_type() == at::kByte, "dequantize_blockwise: codes must be uint8");
  TORCH_CHECK(q.absmax.defined() && q.absmax.scalar_type() == at::kFloat, "dequantize_blockwise: absmax must be fp32");
  check_block(q.block);
  TORCH_CHECK(q.absmax.numel() == num_blocks(q.codes.numel(), q.block), "dequantize_blockwise: ", q.absmax.numel(),
              " absmax values for ", q.codes.numel(), " codes in blocks of ", q.block);
  if (!q.codes.is_cpu()) return detail::dequantize_blockwise_tensor_ops(q);
  const at::Tensor codes_c = q.codes.reshape(-1).contiguous();
  const at::Tensor absmax_c = q.absmax.to(at::kCPU).contiguous();
  const std::int64_t n = codes_c.numel(), block = q.block;
  at::Tensor out = at::empty({n}, at::kFloat);
  const std::uint8_t* codes = codes_c.data_ptr<std::uint8_t>();
  const float* absmax = absmax_c.data_ptr<float>();
  const float* map = dynamic_map(q.is_signed).data_ptr<float>();
  float* dst = out.data_ptr<float>();
  tessera::parallel_for(0, num_blocks(n, block), std::max<std::int64_t>(1, 32768 / block),
                   [&](std::int64_t b0, std::int64_t b1) {
                     for (std::int64_t b = b0; b < b1; ++b) {
                       const std::int64_t begin = b * block, end = std::min(n, begin + block);
                       const float a = absmax[b];
                       for (std::int64_t i = begin; i < end; ++i) dst[i] = map[codes[i]] * a;
                     }
                   });
  return out;
}

namespace detail {

Blockwise8 quantize_blockwise_tensor_ops(const at::Tensor& x, bool is_signed, std::int64_t block) {
  check_block(block);
  at::NoGradGuard no_grad;
  const at::Tensor xf = x.detach().reshape(-1).to(at::kFloat);
  const std::int64_t n = xf.numel(), nb = num_blocks(n, block);
  // Zero padding to whole blocks leaves every absmax as it is.
  const at::Tensor blocks = (nb * block == n ? xf : at::constant_pad_nd(xf, {0, nb * block - n})).view({nb, block});
  at::Tensor absmax = nb == 0 ? at::empty({0}, xf.options()) : blocks.abs().amax(1);
  const at::Tensor inv = at::where(absmax > 0, absmax.reciprocal(), at::zeros_like(absmax));
  const at::Tensor normalized = (blocks * inv.unsqueeze(1)).view(-1).slice(0, 0, n);
  const at::Tensor mid = dynamic_map_midpoints(is_signed).to(xf.device());
  at::Tensor codes = at::searchsorted(mid, normalized, /*out_int32=*/true).to(at::kByte);
  return Blockwise8{std::move(codes), std::move(absmax), block, is_signed};
}

at::Tensor dequantize_blockwise_tensor_ops(const Blockwise8& q) {
  check_block(q.block);
  at::NoGradGuard no_grad;
  const std::int64_t n = q.codes.numel();
  const at::Tensor map = dynamic_map(q.is_signed).to(q.codes.device());
  const at::Tensor values = map.index_select(0, q.codes.reshape(-1).to(at::kLong));
  const at::Tensor scale = q.absmax.to(q.codes.device()).repeat_interleave(q.block).slice(0, 0, n);
  return values * scale;
}

}  // namespace detail
}  // namespace tessera::quant
