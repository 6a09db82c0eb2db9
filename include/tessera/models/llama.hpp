#pragma once
// defines: tessera::models::Llama, the Llama family with Hugging Face LlamaForCausalLM semantics:
// RMSNorm computed in fp32, rotary embeddings (rope_theta, rotate-half layout), SwiGLU MLP,
// grouped-query attention, no biases, optional tied embeddings, mean next-token cross-entropy.
//
// Shapes: tokens (B, T) int64 -> hidden (B, T, hidden_size) -> logits (B, T, vocab_size).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/core/param_spec.hpp"
#include "tessera/models/llama_config.hpp"
#include "tessera/models/family_parts.hpp"
#include "tessera/models/model_family.hpp"

namespace tessera::models {

struct Llama {
  using family = model_family_tag;
  using Config = LlamaConfig;
  using Batch = TokenBatch;
  static constexpr std::string_view name = "llama";
  // lora_targets=auto: PEFT's default target_modules for this architecture.
  static constexpr std::string_view lora_targets = "q_proj,v_proj";

  // Per sequence length and compute dtype: the rotary tables, built once per run.
  struct Context {
    at::Tensor cos;  // (T, head_dim), compute dtype
    at::Tensor sin;  // (T, head_dim), compute dtype
  };

  // Shapes: a named preset, or a Hugging Face config.json (and back).
  static Config preset(std::string_view preset_name) { return llama_preset(preset_name); }
  static std::span<const std::string_view> preset_names() { return llama_preset_names(); }
  static Config read_config(const std::filesystem::path& config_json) { return read_llama_config(config_json); }
  static void write_config(const std::filesystem::path& config_json, const Config& config, std::string_view dtype) {
    write_llama_config(config_json, config, dtype);
  }
  static TokenSpec data_spec(const Config& config) { return TokenSpec{config.vocab_size}; }

  // Units: 0 = embed_tokens, 1..L = LlamaDecoderLayer blocks, L+1 = final norm (+ lm_head).
  static std::vector<ParamSpec> parameters(const Config& config);
  static std::vector<UnitInfo> units(const Config& config);
  // Calls: 0 embedding, 1..L blocks, L+1 the loss head (reading the embedding unit too when lm_head is tied).
  static std::vector<CallInfo> calls(const Config& config);
  static Context make_context(const Config& config, std::int64_t seq_len, c10::ScalarType compute_dtype, c10::Device device);

  // call 0: {tokens (B, T)} -> (B, T, H); blocks: {x (B, T, H)} -> (B, T, H);
  // head: {x, targets (B, T)} -> the mean cross-entropy over all B*T positions, fp32 scalar.
  static at::Tensor compute(const Config& config, const Context& ctx, std::size_t call, const CallWeights& w,
                            std::span<const at::Tensor> inputs);
  static at::Tensor forward(const Config& config, CallRunner& run, const Batch& batch);
};

}  // namespace tessera::models
