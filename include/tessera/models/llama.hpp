#pragma once
// defines: tessera::models::Llama, the Llama family with Hugging Face LlamaForCausalLM semantics:
// RMSNorm computed in fp32, rotary embeddings (rope_theta, rotate-half layout), SwiGLU MLP,
// grouped-query attention, no biases, optional tied embeddings, mean next-token cross-entropy.
//
// Units (see ParamSpec): 0 = embed_tokens, 1..L = decoder blocks, L+1 = final norm (+ lm_head).
// Shapes: tokens (B, T) int64 -> hidden (B, T, hidden_size) -> logits (B, T, vocab_size).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string_view>
#include <vector>

#include "tessera/core/param_spec.hpp"
#include "tessera/models/llama_config.hpp"
#include "tessera/models/model_family.hpp"

namespace tessera::models {

struct Llama {
  using family = model_family_tag;
  using Config = LlamaConfig;
  static constexpr std::string_view name = "llama";

  // Per sequence length and compute dtype: the rotary tables, built once per run.
  struct Context {
    at::Tensor cos;  // (T, head_dim), compute dtype
    at::Tensor sin;  // (T, head_dim), compute dtype
  };

  // Shapes: a named preset, or a Hugging Face config.json (and back).
  static Config preset(std::string_view preset_name) { return llama_preset(preset_name); }
  static Config read_config(const std::filesystem::path& config_json) { return read_llama_config(config_json); }
  static void write_config(const std::filesystem::path& config_json, const Config& config, std::string_view dtype) {
    write_llama_config(config_json, config, dtype);
  }

  static std::vector<ParamSpec> parameters(const Config& config);
  static std::size_t num_blocks(const Config& config) { return static_cast<std::size_t>(config.num_hidden_layers); }
  // The head reads the embedding unit too (tied lm_head): sharding gathers both for it.
  static bool head_uses_embedding(const Config& config) { return config.tie_word_embeddings; }
  static Context make_context(const Config& config, std::int64_t seq_len, c10::ScalarType compute_dtype, c10::Device device);

  // embed: w = {embed_tokens}. tokens (B, T) -> (B, T, H)
  static at::Tensor embed(const Config& config, at::TensorList w, const at::Tensor& tokens);
  // One of the block's linear layers, by its index in w (q 1, k 2, v 3, o 4, gate 6, up 7, down 8): x @ W^T,
  // or whatever an adapter makes of it (LoRA's extra path, a dequantized NF4 base).
  using LinearFn = std::function<at::Tensor(std::size_t index, const at::Tensor& x)>;
  // block: w = {input_layernorm, q, k, v, o, post_attention_layernorm, gate, up, down}. (B, T, H) -> (B, T, H)
  // With `linear`, the linear layers are computed by it and their entries of w are not read.
  static at::Tensor block(const Config& config, const Context& ctx, at::TensorList w, const at::Tensor& x,
                          const LinearFn* linear = nullptr);
  // loss: head = {norm[, lm_head]}, embed = {embed_tokens} (used as lm_head when tied). Returns the mean
  // cross-entropy over all B*T positions, in fp32.
  static at::Tensor loss(const Config& config, at::TensorList head, at::TensorList embed, const at::Tensor& x,
                         const at::Tensor& targets);
};

}  // namespace tessera::models
