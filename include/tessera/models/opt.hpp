#pragma once
// defines: tessera::models::Opt, the OPT family with Hugging Face OPTForCausalLM semantics: learned positions
// (offset 2), LayerNorm (eps 1e-5) before (pre-LN) or after (post-LN, opt-350m) each sub-block, multi-head
// attention with biases, ReLU MLP (fc1, fc2), optional project_in/project_out around a narrower token
// embedding, lm_head tied to embed_tokens unless configured otherwise, mean next-token cross-entropy.
// No dropout: tessera trains OPT as with dropout, attention_dropout and layerdrop 0.
//
// Shapes: tokens (B, T) int64 -> word embedding (B, T, word_embed_proj_dim) -> hidden (B, T, hidden_size)
//         -> (B, T, word_embed_proj_dim) -> logits (B, T, vocab_size).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/core/param_spec.hpp"
#include "tessera/models/family_parts.hpp"
#include "tessera/models/model_family.hpp"
#include "tessera/models/opt_config.hpp"

namespace tessera::models {

struct Opt {
  using family = model_family_tag;
  using Config = OptConfig;
  using Batch = TokenBatch;
  static constexpr std::string_view name = "opt";
  // lora_targets=auto: PEFT's default target_modules for this architecture.
  static constexpr std::string_view lora_targets = "q_proj,v_proj";

  // Per sequence length: the rows of embed_positions the T positions read, built once per run.
  struct Context {
    at::Tensor positions;  // (T,) int64: 2, ..., T+1 (HF: cumsum of an all-ones mask - 1, plus the offset 2)
  };

  // Shapes: a named preset, or a Hugging Face config.json (and back).
  static Config preset(std::string_view preset_name) { return opt_preset(preset_name); }
  static std::span<const std::string_view> preset_names() { return opt_preset_names(); }
  static Config read_config(const std::filesystem::path& config_json) { return read_opt_config(config_json); }
  static void write_config(const std::filesystem::path& config_json, const Config& config, std::string_view dtype) {
    write_opt_config(config_json, config, dtype);
  }
  static TokenSpec data_spec(const Config& config) { return TokenSpec{config.vocab_size}; }

  // Units: 0 = embed_tokens, embed_positions (, project_in), 1..L = OPTDecoderLayer blocks,
  // L+1 = the head: final_layer_norm (pre-LN), project_out, lm_head (untied), when it holds any of them.
  static std::vector<ParamSpec> parameters(const Config& config);
  static std::vector<UnitInfo> units(const Config& config);
  // Calls: 0 embedding, 1..L blocks, L+1 the loss head (reading the embedding unit too when lm_head is tied;
  // only it when there is no head unit).
  static std::vector<CallInfo> calls(const Config& config);
  // ConfigError when seq_len exceeds max_position_embeddings (the learned positions end there).
  static Context make_context(const Config& config, std::int64_t seq_len, c10::ScalarType compute_dtype,
                              c10::Device device);

  // call 0: {tokens (B, T)} -> (B, T, H), or {tokens, attention_mask (B, P + T), prefix (B, P, H)} ->
  //         [prefix; embed(tokens)] + the positions of the unpadded ones (OPTLearnedPositionalEmbedding: the
  //         cumulative count of attended positions, padding at position -1), (B, P + T, H);
  // blocks: {x (B, N, H)} -> causal attention, or {x, attention_mask (B, N)} -> causal attention that also skips
  //         padded keys;
  // head: {x, targets (B, N)} -> the mean cross-entropy over the positions whose target is not -100, fp32 scalar.
  static at::Tensor compute(const Config& config, const Context& ctx, std::size_t call, const CallWeights& w,
                            std::span<const at::Tensor> inputs);
  static at::Tensor forward(const Config& config, CallRunner& run, const Batch& batch);
  // The same program behind a prefix of embeddings (BLIP-2), with OPTForCausalLM's loss on inputs_embeds =
  // [prefix; embed(input_ids)] and the labels of the last L positions, shifted inside (see PrefixedTokens).
  // ConfigError for a model with project_in/project_out (the prefix would have to be word_embed_proj_dim wide).
  static at::Tensor forward(const Config& config, CallRunner& run, const PrefixedTokens& tokens);
};

}  // namespace tessera::models
