#pragma once
// defines: tessera::Lora, low-rank adaptation (Hu et al. 2021; PEFT's LoraConfig semantics). Each target
// linear y = x W^T becomes y = x W^T + (alpha / r) * dropout(x) A^T B^T, with A (r, in) kaiming-uniform and
// B (out, r) zero, so training starts from the base model. W is frozen: no gradient, no optimizer state; the
// base is stored once in the compute dtype. Adapters save and load in the PEFT layout (adapter_config.json,
// adapter_model.safetensors); merge_adapter=true exports W + (alpha/r) B A as a plain Hugging Face model.
// Trainable bytes per adapted linear: r * (in + out) parameters, with their gradients and optimizer state.
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

struct Lora {
  using axis = axis::adapter;
  static constexpr std::string_view name = "lora";
  static constexpr bool trains_adapters = true;
  static constexpr bool quantizes_base = false;
  static constexpr bool double_quant = false;
};

}  // namespace tessera
