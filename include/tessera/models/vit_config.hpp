#pragma once
// defines: VitConfig (Hugging Face ViTConfig's fields that shape ViTForImageClassification), its presets, and
// reading/writing config.json.
//
// Not modelled, because tessera trains without them: hidden_dropout_prob and attention_probs_dropout_prob are read
// as 0 (write_vit_config writes 0, the values tessera computed with); the pooler (ViTForImageClassification has
// none); interpolated position encodings (images must be image_size square). qkv_bias must be true, as in every
// published ViT.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::models {

struct VitConfig {
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  std::int64_t image_size = 224;  // square images of image_size x image_size pixels
  std::int64_t patch_size = 16;   // image_size / patch_size patches per side
  std::int64_t num_channels = 3;
  std::int64_t num_labels = 1000;  // classifier outputs; config.json's id2label
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  // id2label's names in id order (empty: LABEL_0, LABEL_1, ...), kept so that a saved dir names its classes.
  std::vector<std::string> labels;

  std::int64_t head_dim() const { return hidden_size / num_attention_heads; }
  std::int64_t patches_per_side() const { return image_size / patch_size; }
  // Positions the encoder sees per image: the patches and the CLS token.
  std::int64_t seq_len() const { return patches_per_side() * patches_per_side() + 1; }

  // Exact count of trainable scalars: embeddings (patch convolution, CLS, positions), blocks, final LayerNorm,
  // classifier.
  std::int64_t parameter_count() const;
  // Throws ConfigError when the shape is inconsistent (e.g. patch_size not dividing image_size).
  void validate(std::string_view origin) const;
};

// Preset names: "tiny", "vit-base-patch16-224", "vit-large-patch16-224", "vit-huge-patch14-224".
std::span<const std::string_view> vit_preset_names();
// Throws ConfigError listing the valid names.
VitConfig vit_preset(std::string_view name);

// Reads DIR/config.json (model_type "vit"); FormatError names the file and the key.
VitConfig read_vit_config(const std::filesystem::path& config_json);
// The Hugging Face config.json text of `config` (indent < 0: one line), which transformers loads as
// ViTForImageClassification.
std::string vit_config_json(const VitConfig& config, std::string_view torch_dtype = "float32", int indent = -1);
void write_vit_config(const std::filesystem::path& config_json, const VitConfig& config, std::string_view torch_dtype);

}  // namespace tessera::models
