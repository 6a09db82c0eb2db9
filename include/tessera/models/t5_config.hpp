#pragma once
// defines: T5Config (Hugging Face T5Config's fields that shape the network), its presets (Flan-T5), and reading and
// writing config.json.
//
// Not modelled, because tessera trains without it: dropout_rate is read as 0 (write_t5_config writes 0, the value
// tessera computed with).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace tessera::io {
class HfConfigJson;
}  // namespace tessera::io

namespace tessera::models {

struct T5Config {
  std::int64_t vocab_size = 32128;
  std::int64_t d_model = 512;
  std::int64_t d_kv = 64;  // per-head width; the attention's inner width is num_heads * d_kv (not d_model)
  std::int64_t d_ff = 2048;
  std::int64_t num_layers = 6;          // encoder blocks
  std::int64_t num_decoder_layers = 6;  // decoder blocks
  std::int64_t num_heads = 8;
  std::int64_t relative_attention_num_buckets = 32;
  std::int64_t relative_attention_max_distance = 128;
  double layer_norm_epsilon = 1e-6;
  // The feed-forward: gated (v1.1, Flan: wo(gelu_new(wi_0 x) * wi_1 x), config "gated-gelu") or not (the original
  // T5: wo(relu(wi x)), config "relu").
  bool gated_gelu = true;
  // lm_head is shared.weight (tied) or its own tensor (v1.1, Flan). scale_decoder_outputs multiplies the decoder's
  // output by d_model^-0.5 before lm_head (the original T5; not v1.1 or Flan).
  bool tie_word_embeddings = false;
  bool scale_decoder_outputs = false;
  std::int64_t pad_token_id = 0;             // pads the encoder's inputs; replaces -100 in the decoder's inputs
  std::int64_t decoder_start_token_id = 0;   // the decoder's first input
  std::int64_t eos_token_id = 1;
  // HF's initializer_factor: shared and lm_head are drawn N(0, factor^2), every other weight with the std its
  // shape gives (T5PreTrainedModel._init_weights); the name is what ModelFamily asks of a Config.
  double initializer_range = 1.0;

  std::int64_t inner_dim() const { return num_heads * d_kv; }
  // Exact count of trainable scalars (shared, both stacks, their relative-position tables and final norms, an untied
  // lm_head).
  std::int64_t parameter_count() const;
  // Throws ConfigError when the shape is inconsistent (e.g. too few position buckets).
  void validate(std::string_view origin) const;
};

// Preset names: "tiny", "flan-t5-small", "flan-t5-base", "flan-t5-large", "flan-t5-xl", "flan-t5-xxl".
std::span<const std::string_view> t5_preset_names();
// Throws ConfigError listing the valid names.
T5Config t5_preset(std::string_view name);

// Reads DIR/config.json (model_type "t5"); FormatError names the file and the key. Whether lm_head is tied follows
// transformers: tie_word_embeddings (absent: true), except that a checkpoint next to the file holding its own
// lm_head.weight keeps it (transformers 5 writes tie_word_embeddings true for every T5, and keeps a saved lm_head).
T5Config read_t5_config(const std::filesystem::path& config_json);
// The same from a config already open (BLIP-2's text_config); whether the checkpoint next to it holds its own
// lm_head (under whatever name) is the caller's to say.
T5Config read_t5_config(const io::HfConfigJson& config, bool checkpoint_has_own_lm_head);
// The Hugging Face config.json text of `config` (indent < 0: one line), which transformers loads as
// T5ForConditionalGeneration.
std::string t5_config_json(const T5Config& config, std::string_view torch_dtype = "float32", int indent = -1);
void write_t5_config(const std::filesystem::path& config_json, const T5Config& config, std::string_view torch_dtype);

}  // namespace tessera::models
