#pragma once
// defines: 8-bit block-wise quantization as in bitsandbytes: a 256-entry code map (the dynamic map:
// signed for values of either sign, unsigned for non-negative ones), blocks of `block` values that share
// one fp32 absmax, each value stored as the index of the nearest code to value/absmax.
// Used by Adam8bit (optimizer state) and by QLora's double quantization of NF4 block scales.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstring>

namespace tessera::quant {

// The dynamic (exponent + linear fraction) map of bitsandbytes' create_dynamic_map(signed, 7, 8):
// 256 sorted fp32 values in [-1, 1] (signed) or [0, 1] (unsigned), containing 0 and 1. CPU tensor.
const at::Tensor& dynamic_map(bool is_signed);
// The 255 midpoints (map[k] + map[k+1]) * 0.5f of dynamic_map(is_signed), fp32 on the CPU: the code
// nearest to x is the number of midpoints below x (see nearest_code).
const at::Tensor& dynamic_map_midpoints(bool is_signed);

// Index of the code nearest to x, given the 255 sorted midpoints of a 256-entry map: the number of
// midpoints below x, by an 8-step branchless binary search (a tie goes to the lower code; NaN to code 0).
inline std::uint8_t nearest_code(const float* midpoints, float x) {
  int i = 0;
  for (int s = 128; s > 0; s >>= 1) i += midpoints[i + s - 1] < x ? s : 0;
  return static_cast<std::uint8_t>(i);
}

// nearest_code for a dynamic map, faster: a table over the top 16 bits of x's fp32 pattern holds the
// number of midpoints below the lowest value of that bucket; two branchless steps add those in the bucket
// below x (a bucket holds at most two, checked when the table is built). Same codes as nearest_code.
struct CodeLookup {
  const std::uint8_t* table = nullptr;  // 65536 entries
  const float* midpoints = nullptr;     // 256 entries: the 255 midpoints, then +inf
  std::uint8_t operator()(float x) const {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    int i = table[bits >> 16];
    i += midpoints[i] < x;
    i += midpoints[i] < x;
    return static_cast<std::uint8_t>(i);
  }
};
const CodeLookup& dynamic_code_lookup(bool is_signed);

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

namespace detail {
// The tensor-op paths that quantize_blockwise/dequantize_blockwise take for non-CPU tensors (searchsorted
// over the midpoints; no copy to the host). Exposed so that the CPU tests check them against the loops.
Blockwise8 quantize_blockwise_tensor_ops(const at::Tensor& x, bool is_signed, std::int64_t block);
at::Tensor dequantize_blockwise_tensor_ops(const Blockwise8& q);
}  // namespace detail

}  // namespace tessera::quant
