#pragma once
// defines: 8-bit block-wise quantization as in bitsandbytes: a 256-entry code map (the dynamic map:
// signed for values of either sign, unsigned for non-negative ones), blocks of `block` values that share
// one fp32 absmax, each value stored as the index of the nearest code to value/absmax.
// Used by Adam8bit (optimizer state) and by QLora's double quantization of NF4 block scales.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tessera::quant {

// The dynamic (exponent + linear fraction) map of bitsandbytes' create_dynamic_map(signed, 7, 8):
// 256 sorted fp32 values in [-1, 1] (signed) or [0, 1] (unsigned), containing 0 and 1. CPU tensor.
const at::Tensor& dynamic_map(bool is_signed);

struct Blockwise8 {
  at::Tensor codes;   // uint8, (n,): index into the map
  at::Tensor absmax;  // fp32, (ceil(n / block),): max |x| of each block
  std::int64_t block = 256;
  bool is_signed = true;
  std::int64_t numel() const { return codes.numel(); }
  std::int64_t bytes() const;  // codes + absmax
};

// Quantizes a 1-D fp32 tensor (CPU or CUDA) into block-wise 8-bit codes, nearest code of x/absmax.
Blockwise8 quantize_blockwise(const at::Tensor& x, bool is_signed, std::int64_t block = 256);
// Back to fp32: map[code] * absmax of the code's block. Same device as q.codes.
at::Tensor dequantize_blockwise(const Blockwise8& q);

}  // namespace tessera::quant
