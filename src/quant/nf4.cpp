// implements: NF4 quantization (quant/nf4.hpp): multi-threaded loops for CPU tensors, tensor ops for the others,
// and nf4_linear's autograd function.
#include "tessera/quant/nf4.hpp"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <string>

#include "tessera/core/parallel.hpp"
#include "tessera/core/error.hpp"

namespace tessera::quant {
namespace {

// bitsandbytes' NF4 table (create_normal_map(0.9677083), fp32).
constexpr std::array<float, 16> kNf4 = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};

// Decision boundaries: code = number of midpoints strictly below value/absmax (ties go to the lower code,
// as bitsandbytes' `x > threshold` tree).
constexpr std::array<float, 15> make_mids() {
  std::array<float, 15> m{};
  for (std::size_t i = 0; i < 15; ++i) m[i] = 0.5f * (kNf4[i] + kNf4[i + 1]);
  return m;
}
constexpr std::array<float, 15> kMids = make_mids();

// The code of 0.0: what an all-zero block's values get, and the padding nibble after an odd numel (as
// bitsandbytes, which quantizes a 0 there), so packed bytes equal bitsandbytes' byte for byte.
constexpr std::uint8_t kZeroCode = 7;
static_assert(kNf4[kZeroCode] == 0.0f);

// bitsandbytes scales by 1 / max(absmax, 1e-38): below about 2.9e-39 the plain reciprocal overflows to inf,
// and a zero in such a block would become NaN (code 0, -absmax) instead of code 7.
constexpr float kMinAbsmax = 1e-38f;

const at::Tensor& table_cpu() {
  static const at::Tensor t = at::from_blob(const_cast<float*>(kNf4.data()), {16}, at::kFloat).clone();
  return t;
}
const at::Tensor& mids_cpu() {
  static const at::Tensor t = at::from_blob(const_cast<float*>(kMids.data()), {15}, at::kFloat).clone();
  return t;
}

// The number of midpoints below x (15 compares, which vectorize over a loop of values).
inline std::uint8_t nf4_code(float x) {
  int c = 0;
  for (std::size_t k = 0; k < kMids.size(); ++k) c += kMids[k] < x;
  return static_cast<std::uint8_t>(c);
}

std::int64_t grain_blocks(std::int64_t block) { return std::max<std::int64_t>(1, 32768 / block); }

std::string shape_str(at::IntArrayRef s) {
  std::string r = "(";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + ")";
}

void check_quantize_args(const at::Tensor& weight, std::int64_t block) {
  if (!weight.defined()) throw Error("nf4_quantize: the weight is an undefined tensor; pass a floating tensor");
  if (!at::isFloatingType(weight.scalar_type()))
    throw Error(std::string("nf4_quantize: weight dtype ") + c10::toString(weight.scalar_type()) +
                " is not a floating type; pass fp32, fp16, bf16 or fp64");
  if (weight.numel() == 0)
    throw Error("nf4_quantize: weight of shape " + shape_str(weight.sizes()) + " has no elements");
  if (block <= 0 || block % 2 != 0)
    throw Error("nf4_quantize: block " + std::to_string(block) + " must be positive and even (e.g. 64)");
}

[[noreturn]] void throw_non_finite(const at::Tensor& weight) {
  throw Error("nf4_quantize: weight of shape " + shape_str(weight.sizes()) +
              " holds inf or NaN; only finite weights can be quantized");
}

Nf4Tensor make_header(const at::Tensor& weight, std::int64_t block) {
  Nf4Tensor q;
  q.shape = weight.sizes().vec();
  q.numel = weight.numel();
  q.block = block;
  return q;
}

// absmax (fp32, on its device) -> q.absmax, or the double-quantized absmax_q + offset.
void store_absmax(Nf4Tensor& q, const at::Tensor& absmax, bool double_quant) {
  q.double_quant = double_quant;
  if (!double_quant) {
    q.absmax = absmax;
    return;
  }
  q.absmax_offset = absmax.is_meta() ? 0.0f : absmax.mean().item<float>();  // a dry run: shapes only
  q.absmax_q = quantize_blockwise(absmax - q.absmax_offset, /*is_signed=*/true, 256);
}

// The fp32 absmax of every block, on q's device.
at::Tensor resolve_absmax(const Nf4Tensor& q) {
  if (!q.double_quant) return q.absmax.contiguous();
  return (dequantize_blockwise(q.absmax_q) + q.absmax_offset).contiguous();
}

void check_nf4(const Nf4Tensor& q, const char* who) {
  const std::string w = who;
  if (!q.codes.defined() || q.codes.scalar_type() != at::kByte || q.codes.numel() != (q.numel + 1) / 2)
    throw Error(w + ": Nf4Tensor codes must be uint8 with ceil(numel/2) = " + std::to_string((q.numel + 1) / 2) +
                " elements; pass a tensor made by nf4_quantize");
  std::int64_t n = 1;
  for (const std::int64_t s : q.shape) n *= s;
  if (n != q.numel || q.numel <= 0 || q.block <= 0 || q.block % 2 != 0)
    throw Error(w + ": Nf4Tensor shape " + shape_str(q.shape) + ", numel " + std::to_string(q.numel) +
                " and block " + std::to_string(q.block) + " are inconsistent; pass a tensor made by nf4_quantize");
  const std::int64_t nblocks = q.nblocks();
  const std::int64_t have = q.double_quant ? q.absmax_q.numel() : (q.absmax.defined() ? q.absmax.numel() : -1);
  if (have != nblocks)
    throw Error(w + ": Nf4Tensor has " + std::to_string(have) + " block scales for " + std::to_string(nblocks) +
                " blocks; pass a tensor made by nf4_quantize");
  const at::Tensor& scales = q.double_quant ? q.absmax_q.codes : q.absmax;
  if (scales.device() != q.codes.device() || (!q.double_quant && q.absmax.scalar_type() != at::kFloat))
    throw Error(w + ": Nf4Tensor block scales must be fp32 on the codes' device (" + q.codes.device().str() +
                "); pass a tensor made by nf4_quantize");
}

// ---- CPU loops ----

template <class T>
bool quantize_cpu(const T* w, std::int64_t numel, std::int64_t block, float* absmax, std::uint8_t* codes) {
  const std::int64_t nblocks = (numel + block - 1) / block;
  std::atomic<bool> finite{true};
  tessera::parallel_for(0, nblocks, grain_blocks(block), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t begin = b * block, end = std::min(numel, begin + block);
      float am = 0.f;
      bool ok = true;
      for (std::int64_t i = begin; i < end; ++i) {
        const float v = static_cast<float>(w[i]);
        ok &= std::isfinite(v);
        am = std::max(am, std::abs(v));
      }
      if (!ok) finite.store(false, std::memory_order_relaxed);
      absmax[b] = am;
      // As bitsandbytes: value times the reciprocal of absmax (at least kMinAbsmax); an all-zero block gets
      // the code of 0.
      const float inv = 1.f / std::max(am, kMinAbsmax);
      // begin is even (block is even), so this block owns bytes begin/2 .. (end-1)/2. Codes go through
      // a small buffer so the code loop vectorizes.
      constexpr std::int64_t kTile = 512;
      std::array<std::uint8_t, kTile> c;
      for (std::int64_t t0 = begin; t0 < end; t0 += kTile) {
        const std::int64_t len = std::min(kTile, end - t0);
        for (std::int64_t i = 0; i < len; ++i) c[i] = nf4_code(static_cast<float>(w[t0 + i]) * inv);
        if (len % 2) c[len] = kZeroCode;  // only at the very end: the padding nibble
        for (std::int64_t j = 0; j < (len + 1) / 2; ++j)
          codes[t0 / 2 + j] = static_cast<std::uint8_t>(c[2 * j] << 4 | c[2 * j + 1]);
      }
    }
  });
  return finite.load();
}

template <class T>
void dequantize_cpu(const std::uint8_t* codes, const float* absmax, std::int64_t numel, std::int64_t block, T* out) {
  const std::int64_t nblocks = (numel + block - 1) / block;
  tessera::parallel_for(0, nblocks, grain_blocks(block), [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t begin = b * block, end = std::min(numel, begin + block);
      std::array<float, 16> lut;
      for (std::size_t c = 0; c < 16; ++c) lut[c] = kNf4[c] * absmax[b];
      std::int64_t i = begin;
      for (; i + 1 < end; i += 2) {
        const std::uint8_t byte = codes[i / 2];
        out[i] = static_cast<T>(lut[byte >> 4]);
        out[i + 1] = static_cast<T>(lut[byte & 15]);
      }
      if (i < end) out[i] = static_cast<T>(lut[codes[i / 2] >> 4]);
    }
  });
}

Nf4Tensor quantize_cpu_path(const at::Tensor& weight, bool double_quant, std::int64_t block) {
  Nf4Tensor q = make_header(weight, block);
  const at::Tensor w = weight.detach().contiguous();
  q.codes = at::empty({(q.numel + 1) / 2}, at::TensorOptions().dtype(at::kByte));
  at::Tensor absmax = at::empty({q.nblocks()}, at::TensorOptions().dtype(at::kFloat));
  bool finite = true;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, w.scalar_type(), "nf4_quantize", [&] {
    finite = quantize_cpu(w.data_ptr<scalar_t>(), q.numel, block, absmax.data_ptr<float>(),
                          q.codes.data_ptr<std::uint8_t>());
  });
  if (!finite) throw_non_finite(weight);
  store_absmax(q, absmax, double_quant);
  return q;
}

at::Tensor dequantize_cpu_path(const Nf4Tensor& q, c10::ScalarType dtype) {
  const at::Tensor codes = q.codes.contiguous();
  const at::Tensor absmax = resolve_absmax(q);
  at::Tensor out = at::empty(q.shape, at::TensorOptions().dtype(dtype));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "nf4_dequantize", [&] {
    dequantize_cpu(codes.data_ptr<std::uint8_t>(), absmax.data_ptr<float>(), q.numel, q.block,
                   out.data_ptr<scalar_t>());
  });
  return out;
}

// ---- nf4_linear ----

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The Nf4Tensor's tensors are refcounted handles: keeping them in saved_data costs no memory.
void save_nf4(AutogradContext* ctx, const Nf4Tensor& q) {
  auto& d = ctx->saved_data;
  d["shape"] = q.shape;
  d["numel"] = q.numel;
  d["block"] = q.block;
  d["codes"] = q.codes;
  d["double_quant"] = q.double_quant;
  if (q.double_quant) {
    d["aq_codes"] = q.absmax_q.codes;
    d["aq_absmax"] = q.absmax_q.absmax;
    d["aq_block"] = q.absmax_q.block;
    d["aq_signed"] = q.absmax_q.is_signed;
    d["offset"] = static_cast<double>(q.absmax_offset);
  } else {
    d["absmax"] = q.absmax;
  }
}

Nf4Tensor load_nf4(AutogradContext* ctx) {
  auto& d = ctx->saved_data;
  Nf4Tensor q;
  q.shape = d["shape"].toIntVector();
  q.numel = d["numel"].toInt();
  q.block = d["block"].toInt();
  q.codes = d["codes"].toTensor();
  q.double_quant = d["double_quant"].toBool();
  if (q.double_quant) {
    q.absmax_q.codes = d["aq_codes"].toTensor();
    q.absmax_q.absmax = d["aq_absmax"].toTensor();
    q.absmax_q.block = d["aq_block"].toInt();
    q.absmax_q.is_signed = d["aq_signed"].toBool();
    q.absmax_offset = static_cast<float>(d["offset"].toDouble());
  } else {
    q.absmax = d["absmax"].toTensor();
  }
  return q;
}

struct Nf4Linear : torch::autograd::Function<Nf4Linear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const Nf4Tensor& q, const ops::Gemm& gemm) {
    save_nf4(ctx, q);
    ctx->saved_data["x_dtype"] = static_cast<std::int64_t>(x.scalar_type());
    ctx->saved_data["lowp"] = static_cast<std::int64_t>(gemm.lowp);
    return gemm.linear(x, nf4_dequantize(q, x.scalar_type()));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto dtype = static_cast<c10::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const Nf4Tensor q = load_nf4(ctx);
    const ops::Gemm gemm{static_cast<ops::Lowp>(ctx->saved_data["lowp"].toInt())};
    at::Tensor g = grads[0];
    if (g.scalar_type() != dtype) g = g.to(dtype);
    return {gemm.linear(g, nf4_dequantize(q, dtype).t()), at::Tensor(), at::Tensor()};  // g W = g (W^T)^T
  }
};

}  // namespace

std::span<const float, 16> nf4_values() { return std::span<const float, 16>(kNf4); }

std::int64_t Nf4Tensor::bytes() const {
  const std::int64_t code_bytes = codes.defined() ? codes.numel() : 0;
  if (double_quant) return code_bytes + absmax_q.bytes() + static_cast<std::int64_t>(sizeof(float));
  return code_bytes + (absmax.defined() ? absmax.numel() * static_cast<std::int64_t>(sizeof(float)) : 0);
}

c10::Device Nf4Tensor::device() const {
  if (!codes.defined()) throw Error("Nf4Tensor::device: the tensor is empty; make it with nf4_quantize");
  return codes.device();
}

Nf4Tensor nf4_quantize(const at::Tensor& weight, bool double_quant, std::int64_t block) {
  check_quantize_args(weight, block);
  if (weight.is_cpu()) return quantize_cpu_path(weight, double_quant, block);
  return detail::nf4_quantize_tensor_ops(weight, double_quant, block);
}

at::Tensor nf4_dequantize(const Nf4Tensor& q, c10::ScalarType dtype) {
  check_nf4(q, "nf4_dequantize");
  if (!at::isFloatingType(dtype))
    throw Error(std::string("nf4_dequantize: dtype ") + c10::toString(dtype) +
                " is not a floating type; ask for fp32, fp16, bf16 or fp64");
  if (q.codes.is_cpu()) return dequantize_cpu_path(q, dtype);
  return detail::nf4_dequantize_tensor_ops(q, dtype);
}

at::Tensor nf4_linear(const at::Tensor& x, const Nf4Tensor& q, const ops::Gemm& gemm) {
  check_nf4(q, "nf4_linear");
  if (q.shape.size() != 2)
    throw Error("nf4_linear: the quantized weight has shape " + shape_str(q.shape) + "; it must be (out, in)");
  if (!x.defined() || x.dim() < 1 || x.size(-1) != q.shape[1])
    throw Error("nf4_linear: input of shape " + (x.defined() ? shape_str(x.sizes()) : std::string("(undefined)")) +
                " does not end in in_features = " + std::to_string(q.shape[1]) + " of the weight " +
                shape_str(q.shape));
  if (!at::isFloatingType(x.scalar_type()))
    throw Error(std::string("nf4_linear: input dtype ") + c10::toString(x.scalar_type()) + " is not floating");
  if (x.device() != q.device())
    throw Error("nf4_linear: input on " + x.device().str() + " but the quantized weight on " + q.device().str() +
                "; move one of them");
  return Nf4Linear::apply(x, q, gemm);
}

namespace detail {

Nf4Tensor nf4_quantize_tensor_ops(const at::Tensor& weight, bool double_quant, std::int64_t block) {
  check_quantize_args(weight, block);
  Nf4Tensor q = make_header(weight, block);
  const std::int64_t nblocks = q.nblocks(), pad = nblocks * block - q.numel;
  at::Tensor w = weight.detach().reshape({-1}).to(at::kFloat);
  if (pad > 0) w = at::constant_pad_nd(w, {0, pad}, 0);
  const at::Tensor blocks = w.view({nblocks, block});
  const at::Tensor absmax = blocks.abs().amax({1});
  if (!absmax.is_meta() && !at::isfinite(absmax).all().item<bool>()) throw_non_finite(weight);
  const at::Tensor inv = absmax.clamp_min(kMinAbsmax).reciprocal();
  const at::Tensor x = blocks * inv.unsqueeze(1);
  // bucketize(right=false) = number of midpoints strictly below x, as nf4_code.
  at::Tensor c = at::bucketize(x, mids_cpu().to(w.device()), /*out_int32=*/true, /*right=*/false)
                     .reshape({-1})
                     .slice(0, 0, q.numel)
                     .to(at::kByte);
  if (q.numel % 2) c = at::constant_pad_nd(c, {0, 1}, kZeroCode);
  const at::Tensor pairs = c.view({-1, 2});
  q.codes = at::bitwise_or(at::bitwise_left_shift(pairs.select(1, 0), 4), pairs.select(1, 1)).contiguous();
  store_absmax(q, absmax, double_quant);
  return q;
}

at::Tensor nf4_dequantize_tensor_ops(const Nf4Tensor& q, c10::ScalarType dtype) {
  check_nf4(q, "nf4_dequantize");
  const std::int64_t nblocks = q.nblocks(), pad = nblocks * q.block - q.numel;
  const at::Tensor hi = at::bitwise_right_shift(q.codes, 4), lo = at::bitwise_and(q.codes, 15);
  const at::Tensor idx = at::stack({hi, lo}, 1).reshape({-1}).slice(0, 0, q.numel).to(at::kInt);
  at::Tensor v = table_cpu().to(q.codes.device()).index_select(0, idx);
  if (pad > 0) v = at::constant_pad_nd(v, {0, pad}, 0);
  v = v.view({nblocks, q.block}) * resolve_absmax(q).unsqueeze(1);
  return v.reshape({-1}).slice(0, 0, q.numel).reshape(q.shape).to(dtype);
}

}  // namespace detail

}  // namespace tessera::quant
