#pragma once
// defines: LlamaConfig (Hugging Face LlamaConfig's fields that shape the network), its presets,
// and reading/writing config.json.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace tessera::models {

struct LlamaConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t hidden_size = 4096;
  std::int64_t intermediate_size = 11008;
  std::int64_t num_hidden_layers = 32;
  std::int64_t num_attention_heads = 32;
  std::int64_t num_key_value_heads = 32;  // < num_attention_heads: grouped-query attention
  std::int64_t head_dim = 128;            // hidden_size / num_attention_heads unless config.json says otherwise
  std::int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;

  // Exact count of trainable scalars (embedding, blocks, final norm, untied lm_head).
  std::int64_t parameter_count() const;
  // FLOPs one token costs in a training step (forward and backward) with rows of seq_len tokens, as PaLM
  // (Appendix B) and torchtitan count them: 6 per matmul weight the token meets (the projections, the MLP and the
  // LM head, tied or not; not the embedding lookup) plus 12 * layers * heads * head_dim * seq_len (attention scores
  // and their values, forward and backward, the causal mask not discounted).
  double training_flops_per_token(std::int64_t seq_len) const;
  // Throws ConfigError when the shape is inconsistent (e.g. heads not dividing hidden_size).
  void validate(std::string_view origin) const;
};

// Preset names: "micro", "tiny", "llama-1b", "open-llama-3b", "open-llama-7b", "open-llama-13b", "code-llama-7b".
std::span<const std::string_view> llama_preset_names();
// Throws ConfigError listing the valid names.
LlamaConfig llama_preset(std::string_view name);

// Reads DIR/config.json (model_type "llama"); FormatError names the file and the key.
LlamaConfig read_llama_config(const std::filesystem::path& config_json);
// Writes a config.json that Hugging Face transformers loads as LlamaForCausalLM.
// The Hugging Face config.json text of `config` (indent < 0: one line).
std::string llama_config_json(const LlamaConfig& config, std::string_view torch_dtype = "float32", int indent = -1);
void write_llama_config(const std::filesystem::path& config_json, const LlamaConfig& config, std::string_view torch_dtype);

}  // namespace tessera::models
