#pragma once
// defines: OptConfig (Hugging Face OPTConfig's fields that shape the network), its presets,
// and reading/writing config.json.
//
// Not modelled, because tessera trains without them: dropout, attention_dropout and layerdrop are read as 0
// (whatever config.json says; write_opt_config writes 0, the values tessera computed with).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace tessera::io {
class HfConfigJson;
}  // namespace tessera::io

namespace tessera::models {

struct OptConfig {
  std::int64_t vocab_size = 50272;
  std::int64_t hidden_size = 768;
  std::int64_t ffn_dim = 3072;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  // Learned positions: embed_positions has max_position_embeddings + 2 rows (HF's offset of 2).
  std::int64_t max_position_embeddings = 2048;
  // Width of the token embedding and the LM head. != hidden_size: project_in (hidden, word) after the
  // embedding and project_out (word, hidden) before the head, as opt-350m.
  std::int64_t word_embed_proj_dim = 768;
  bool do_layer_norm_before = true;      // pre-LN; false: post-LN (opt-350m), and no final layer norm
  bool remove_final_layer_norm = false;  // HF's _remove_final_layer_norm (checkpoints older than transformers 4.20)
  // embed_tokens' padding_idx: the row gets no gradient from the lookup (nn.Embedding's padding_idx); -1 = none.
  std::int64_t pad_token_id = 1;
  double initializer_range = 0.02;  // config.json's "init_std"
  bool tie_word_embeddings = true;

  std::int64_t head_dim() const { return hidden_size / num_attention_heads; }
  bool has_projections() const { return word_embed_proj_dim != hidden_size; }
  bool has_final_layer_norm() const { return do_layer_norm_before && !remove_final_layer_norm; }
  // The head unit holds final_layer_norm, project_out and an untied lm_head; without any of them there is no
  // head unit and the head call reads the embedding unit alone.
  bool has_head_unit() const { return has_final_layer_norm() || has_projections() || !tie_word_embeddings; }

  // FLOPs one token costs in a training step, counted as LlamaConfig::training_flops_per_token counts them (the
  // q/k/v/out projections, fc1, fc2, project_in/out and the LM head; not the embedding lookups).
  double training_flops_per_token(std::int64_t seq_len) const;
  // Exact count of trainable scalars (embeddings, projections, blocks, final norm, untied lm_head).
  std::int64_t parameter_count() const;
  // Throws ConfigError when the shape is inconsistent (e.g. heads not dividing hidden_size).
  void validate(std::string_view origin) const;
};

// Preset names: "tiny", "opt-125m", "opt-350m", "opt-1.3b", "opt-2.7b", "opt-6.7b".
std::span<const std::string_view> opt_preset_names();
// Throws ConfigError listing the valid names.
OptConfig opt_preset(std::string_view name);

// Reads DIR/config.json (model_type "opt"); FormatError names the file and the key.
OptConfig read_opt_config(const std::filesystem::path& config_json);
// The same from a config already open (BLIP-2's text_config).
OptConfig read_opt_config(const io::HfConfigJson& config);
// The Hugging Face config.json text of `config` (indent < 0: one line), which transformers loads as
// OPTForCausalLM.
std::string opt_config_json(const OptConfig& config, std::string_view torch_dtype = "float32", int indent = -1);
void write_opt_config(const std::filesystem::path& config_json, const OptConfig& config, std::string_view torch_dtype);

}  // namespace tessera::models
