#pragma once
// defines: Blip2VisionConfig, Blip2QFormerConfig and Blip2Config<LmConfig> (Hugging Face Blip2Config's fields that
// shape Blip2ForConditionalGeneration: the vision model, the Q-Former, the query tokens and the language model's
// config), their presets, exact parameter counts, and reading and writing config.json (the sub-models' configs
// nested as vision_config, qformer_config and text_config).
//
// Not modelled, because tessera trains without them: dropout, and the Q-Former's text path (use_qformer_text_input:
// Blip2ForConditionalGeneration never runs it, so its word embeddings and text feed-forward are absent).
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "tessera/models/opt_config.hpp"
#include "tessera/models/t5_config.hpp"

namespace tessera::models {

// Blip2VisionModel: patch convolution (with bias), class token, learned positions, pre-LN Blip2EncoderLayer blocks
// (one fused qkv linear with a (3H) bias, projection, GELU MLP), post_layernorm. EVA ViT-g/14 by default.
struct Blip2VisionConfig {
  std::int64_t hidden_size = 1408;
  std::int64_t intermediate_size = 6144;
  std::int64_t num_hidden_layers = 39;
  std::int64_t num_attention_heads = 16;
  std::int64_t image_size = 224;
  std::int64_t patch_size = 14;
  double layer_norm_eps = 1e-6;

  std::int64_t patches_per_side() const { return image_size / patch_size; }
  std::int64_t positions() const { return patches_per_side() * patches_per_side() + 1; }  // patches and the class
  std::int64_t parameter_count() const;
  void validate(std::string_view origin) const;
};

// Blip2QFormerModel as Blip2ForConditionalGeneration runs it: a LayerNorm on the query embeddings, then BERT-style
// post-LN layers; layer i cross-attends to the image features (width encoder_hidden_size) when
// i % cross_attention_frequency == 0; every layer's feed-forward is the query one (intermediate_query,
// output_query).
struct Blip2QFormerConfig {
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  std::int64_t cross_attention_frequency = 2;
  std::int64_t encoder_hidden_size = 1408;
  double layer_norm_eps = 1e-12;

  bool cross_attends(std::int64_t layer) const { return layer % cross_attention_frequency == 0; }
  std::int64_t parameter_count() const;
  void validate(std::string_view origin) const;
};

// The language model's width, what language_projection maps the Q-Former's output to.
inline std::int64_t lm_width(const OptConfig& c) { return c.hidden_size; }
inline std::int64_t lm_width(const T5Config& c) { return c.d_model; }
inline std::int64_t text_vocab_size(const OptConfig& c) { return c.vocab_size; }
inline std::int64_t text_vocab_size(const T5Config& c) { return c.vocab_size; }

template <class LmConfig>
struct Blip2Config {
  Blip2VisionConfig vision;
  Blip2QFormerConfig qformer;
  std::int64_t num_query_tokens = 32;
  // The token id that marks the query positions in Hugging Face's input_ids (the processor puts num_query_tokens of
  // them before the caption; the model replaces their embeddings with the projected queries). tessera's captions hold
  // the caption alone and the family puts the queries first; the id is what a labels=input_ids loss sees there.
  std::int64_t image_token_index = 0;
  LmConfig text;
  double initializer_range = 0.02;

  // query_tokens (1, n, Q) and language_projection (T, Q) with its bias.
  std::int64_t bridge_parameter_count() const {
    return num_query_tokens * qformer.hidden_size + lm_width(text) * qformer.hidden_size + lm_width(text);
  }
  std::int64_t parameter_count() const {
    return vision.parameter_count() + qformer.parameter_count() + bridge_parameter_count() + text.parameter_count();
  }
  // Each part's own checks, and the Q-Former's cross-attention width equal to the vision model's.
  void validate(std::string_view origin) const;
};

// Presets: "tiny", "blip2-opt-2.7b", "blip2-opt-6.7b" (Salesforce/blip2-opt-*); "tiny", "blip2-flan-t5-xl",
// "blip2-flan-t5-xxl" (Salesforce/blip2-flan-t5-*). ConfigError listing the valid names otherwise.
std::span<const std::string_view> blip2_opt_preset_names();
Blip2Config<OptConfig> blip2_opt_preset(std::string_view name);
std::span<const std::string_view> blip2_t5_preset_names();
Blip2Config<T5Config> blip2_t5_preset(std::string_view name);

// Reads DIR/config.json (model_type "blip-2", text_config's model_type "opt" or "t5" as LmConfig says); FormatError
// names the file, the nested config and the key. Settings tessera does not compute (a vision hidden_act other than
// gelu, qkv_bias false, use_qformer_text_input) are refused.
template <class LmConfig>
Blip2Config<LmConfig> read_blip2_config(const std::filesystem::path& config_json);
// The Hugging Face config.json text of `config` (indent < 0: one line), which transformers loads as
// Blip2ForConditionalGeneration.
template <class LmConfig>
std::string blip2_config_json(const Blip2Config<LmConfig>& config, std::string_view torch_dtype = "float32",
                              int indent = -1);
template <class LmConfig>
void write_blip2_config(const std::filesystem::path& config_json, const Blip2Config<LmConfig>& config,
                        std::string_view torch_dtype);

}  // namespace tessera::models
