#pragma once
// defines: NF4 (4-bit NormalFloat, QLoRA) quantization of frozen weights: blocks of `block` values share
// one absmax, each value is stored as the 4-bit index of the nearest of 16 normal-quantile code values to
// value * (1 / max(absmax, 1e-38)), two per byte: bitsandbytes' quantize_4bit(quant_type="nf4") layout.
// Optional double quantization stores the absmax values in 8 bits.
// nf4_linear runs x @ W^T dequantizing W on the fly in forward and again in backward, its products through gemm.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/ops/gemm.hpp"
#include "tessera/quant/blockwise8.hpp"

namespace tessera::quant {

// The 16 NF4 code values of the QLoRA paper (bitsandbytes' NF4 table), ascending, -1 .. 1 with an exact 0.
std::span<const float, 16> nf4_values();

struct Nf4Tensor {
  std::vector<std::int64_t> shape;  // the weight's shape, e.g. (out, in)
  std::int64_t numel = 0;
  std::int64_t block = 64;
  at::Tensor codes;   // uint8 (ceil(numel/2),): element 2i in the high nibble, 2i+1 in the low; an odd
                      // numel pads the last low nibble with 7, the code of 0.0 (bitsandbytes' bytes)
  at::Tensor absmax;  // fp32 (nblocks,) when not double-quantized (undefined otherwise)
  // double quantization (QLoRA §3): absmax - offset quantized block-wise to 8 bits (signed dynamic map,
  // blocks of 256); codes are computed from the exact absmax, as bitsandbytes does
  bool double_quant = false;
  Blockwise8 absmax_q;      // when double_quant
  float absmax_offset = 0;  // mean of the absmax values
  std::int64_t nblocks() const { return (numel + block - 1) / block; }
  // all storage: codes + absmax (4 bytes each), or codes + absmax_q.bytes() + 4 (the offset)
  std::int64_t bytes() const;
  c10::Device device() const;
};

// Any floating dtype, CPU or CUDA, at least one element; result on weight's device. `block` must be even
// and positive (a byte never spans two blocks). Throws tessera::Error on bad input or non-finite weights.
Nf4Tensor nf4_quantize(const at::Tensor& weight, bool double_quant, std::int64_t block = 64);
// The weight back (table[code] * absmax in fp32, then cast to dtype), shape q.shape, on q's device.
at::Tensor nf4_dequantize(const Nf4Tensor& q, c10::ScalarType dtype);
// y = x @ W^T with W = dequantize(q) in x's dtype, x (..., in), q.shape (out, in). Autograd: grad for x
// only (the base is frozen); backward dequantizes W again instead of saving it, so no dequantized weight
// outlives the call.
at::Tensor nf4_linear(const at::Tensor& x, const Nf4Tensor& q, const ops::Gemm& gemm = {});

namespace detail {
// The tensor-op path used for non-CPU tensors, callable on the CPU so tests can compare it with the
// CPU loops (both give identical codes and values).
Nf4Tensor nf4_quantize_tensor_ops(const at::Tensor& weight, bool double_quant, std::int64_t block);
at::Tensor nf4_dequantize_tensor_ops(const Nf4Tensor& q, c10::ScalarType dtype);
}  // namespace detail

}  // namespace tessera::quant
