#pragma once
// defines: tessera::QLora (Dettmers et al. 2023): Lora on a base whose linear weights (attention and MLP
// projections of every block) are stored as NF4: 4-bit codes of the normal-float table, two per byte, with one
// absmax per block of 64 (quant/nf4.hpp). They are dequantized to the compute dtype on the fly, in forward and
// again in backward, so no dense copy outlives a call. Embeddings, norms and the LM head stay in the compute
// dtype, as bitsandbytes leaves them. QLoraT<false> keeps fp32 block scales; QLora (the paper's setting)
// double-quantizes them to 8 bits in blocks of 256.
// Base linear bytes per parameter: 0.5 + 4/64 = 0.5625, or 0.5 + 1/64 + 4/(64*256) ~ 0.5159 with double quant.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

template <bool DoubleQuant>
struct QLoraT {
  using axis = axis::adapter;
  static constexpr std::string_view name = DoubleQuant ? "qlora (nf4, double quant)" : "qlora (nf4)";
  static constexpr bool trains_adapters = true;
  static constexpr bool quantizes_base = true;
  static constexpr bool double_quant = DoubleQuant;
};

using QLora = QLoraT<true>;

}  // namespace tessera
