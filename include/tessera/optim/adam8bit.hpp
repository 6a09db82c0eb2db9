#pragma once
// defines: tessera::Adam8bit, bitsandbytes' Adam8bit (block-wise 8-bit optimizer state) with its defaults:
//   m, v  dequantized per block of 256: code map[c] * block absmax (m signed map, v unsigned map)
//   m  <- b1*m + (1-b1)*g ;  v <- b2*v + (1-b2)*g^2                     (fp32)
//   p  <- p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps) ;  p <- p * (1 - lr*wd)
//   m, v  requantized with each block's new absmax
// Tensors under min_8bit_size elements keep fp32 m and v (8 bytes per parameter) as bnb does; the others
// take 2 bytes per parameter plus two fp32 absmax per 256-block (2 + 8/256 bytes per parameter).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/core/axis.hpp"
#include "tessera/optim/concept.hpp"

namespace tessera {

struct Adam8bit {
  using axis = axis::optimizer;
  static constexpr std::string_view name = "adam8bit";
  static constexpr double eps = 1e-8;
  static constexpr double default_weight_decay = 0.0;
  static constexpr std::int64_t block = 256;            // values per absmax
  static constexpr std::int64_t min_8bit_size = 4096;   // smaller tensors keep fp32 state

  // Where one ParamSegment's state lives: buffer elements [offset, offset+length) use codes/absmax from
  // state_offset/block_offset (8-bit) or m32/v32 from state_offset (fp32).
  struct Span {
    std::int64_t offset = 0;
    std::int64_t length = 0;
    bool quantized = false;
    std::int64_t state_offset = 0;
    std::int64_t block_offset = 0;
  };
  struct State {
    std::vector<Span> spans;  // by offset; padding is in none
    at::Tensor m_codes;       // uint8, the 8-bit spans' elements: signed dynamic map
    at::Tensor v_codes;       // uint8: unsigned dynamic map
    at::Tensor m_absmax;      // fp32, one per 256-block of each 8-bit span (blocks start at the span's start)
    at::Tensor v_absmax;
    at::Tensor m32;           // fp32, the fp32 spans' elements
    at::Tensor v32;
    at::Tensor map_signed;    // the dynamic maps on the buffer's device (CUDA only; not counted as state)
    at::Tensor map_unsigned;
    std::int64_t steps = 0;
  };

  // The whole buffer as one tensor. state_dtype is ignored: the state is 8-bit (or fp32) by design.
  static State init(const at::Tensor& flat_param, c10::ScalarType state_dtype);
  static State init(const at::Tensor& flat_param, c10::ScalarType state_dtype, std::span<const ParamSegment> segments);
  // Params fp32, bf16 or fp16 (updated in fp32, rounded once); grads of any floating dtype.
  static void step(State& state, at::Tensor& flat_param, const at::Tensor& flat_grad, const StepHyper& hyper);
  static std::int64_t state_bytes(const State& state);
  // The codes and absmax follow the shard's block layout, so a checkpoint of them is read back by runs with the
  // same shard group size only (the dynamic maps are constants, rebuilt by init).
  static std::vector<StateTensor> state_tensors(State& state) {
    return {{"m_codes", state.m_codes, false}, {"v_codes", state.v_codes, false}, {"m_absmax", state.m_absmax, false},
            {"v_absmax", state.v_absmax, false}, {"m32", state.m32, false},         {"v32", state.v32, false}};
  }
};

namespace detail {
// The tensor-op update that Adam8bit::step takes for CUDA tensors when tessera is built without its CUDA
// kernel. Exposed so that the CPU tests check it against the fused loop.
void adam8bit_step_tensor_ops(Adam8bit::State& state, at::Tensor& flat_param, const at::Tensor& flat_grad,
                              const StepHyper& hyper);
}  // namespace detail

}  // namespace tessera
