#pragma once
// defines: AdapterPolicy, what the engine asks an adapter policy.
//   name            label printed in the config table
//   trains_adapters the base model is frozen (no gradients, no optimizer state); low-rank adapters on the
//                   target linears are the only trainable parameters
//   quantizes_base  the base linear weights are stored as NF4 (4-bit) and dequantized on the fly
//   double_quant    (with quantizes_base) the NF4 block scales are themselves quantized to 8 bits
// The adapter's shape (r, alpha, dropout, targets) is runtime config: lora_r, lora_alpha, lora_dropout,
// lora_targets, or an adapter=DIR in the PEFT layout.
#include <concepts>
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

template <class P>
concept AdapterPolicy = PolicyOf<P, axis::adapter> && requires {
  { P::name } -> std::convertible_to<std::string_view>;
  { P::trains_adapters } -> std::convertible_to<bool>;
  { P::quantizes_base } -> std::convertible_to<bool>;
  { P::double_quant } -> std::convertible_to<bool>;
};

}  // namespace tessera
