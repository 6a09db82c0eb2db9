#include "tessera/models/blip2_config.hpp"

#include <array>
#include <string>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/io/hf_config_json.hpp"
#include "tessera/models/shape_check.hpp"

namespace tessera::models {
namespace {

// tiny: a 2-layer vision model on 32x32 images in 8x8 patches, a 2-layer Q-Former of width 128 with 8 queries,
// over each LM's tiny preset; for CPU runs and tests.
Blip2VisionConfig tiny_vision() {
  Blip2VisionConfig v;
  v.hidden_size = 128;
  v.intermediate_size = 512;
  v.num_hidden_layers = 2;
  v.num_attention_heads = 4;
  v.image_size = 32;
  v.patch_size = 8;
  return v;
}

Blip2QFormerConfig tiny_qformer() {
  Blip2QFormerConfig q;
  q.hidden_size = 128;
  q.num_hidden_layers = 2;
  q.num_attention_heads = 4;
  q.intermediate_size = 256;
  q.encoder_hidden_size = 128;
  return q;
}

template <class LmConfig>
Blip2Config<LmConfig> make(LmConfig text, bool tiny) {
  Blip2Config<LmConfig> c;
  if (tiny) {
    c.vision = tiny_vision();
    c.qformer = tiny_qformer();
    c.num_query_tokens = 8;
  }
  c.text = std::move(text);
  return c;
}

// Published shapes (Salesforce/blip2-*): EVA ViT-g/14 (Blip2VisionConfig's defaults), the 12-layer Q-Former with
// 32 queries, and the language model of the name.
const std::array<std::pair<std::string_view, Blip2Config<OptConfig>>, 3>& opt_presets() {
  static const std::array<std::pair<std::string_view, Blip2Config<OptConfig>>, 3> table{{
      {"tiny", make(opt_preset("tiny"), true)},
      {"blip2-opt-2.7b", make(opt_preset("opt-2.7b"), false)},
      {"blip2-opt-6.7b", make(opt_preset("opt-6.7b"), false)},
  }};
  return table;
}

const std::array<std::pair<std::string_view, Blip2Config<T5Config>>, 3>& t5_presets() {
  static const std::array<std::pair<std::string_view, Blip2Config<T5Config>>, 3> table{{
      {"tiny", make(t5_preset("tiny"), true)},
      {"blip2-flan-t5-xl", make(t5_preset("flan-t5-xl"), false)},
      {"blip2-flan-t5-xxl", make(t5_preset("flan-t5-xxl"), false)},
  }};
  return table;
}

}  // namespace

std::int64_t Blip2VisionConfig::parameter_count() const {
  const std::int64_t h = hidden_size, i = intermediate_size;
  const std::int64_t embeddings = h * 3 * patch_size * patch_size + h + h + positions() * h;  // conv, class, positions
  // qkv (3H, H) with its (3H) bias, projection, two LayerNorms, fc1, fc2.
  const std::int64_t layer = 3 * h * h + 3 * h + h * h + h + 4 * h + h * i + i + i * h + h;
  return embeddings + num_hidden_layers * layer + 2 * h;  // post_layernorm
}

void Blip2VisionConfig::validate(std::string_view origin) const {
  const ShapeCheck check{origin, "BLIP-2 vision model"};
  check.positive("vision_config.hidden_size", hidden_size);
  check.positive("vision_config.intermediate_size", intermediate_size);
  check.positive("vision_config.num_hidden_layers", num_hidden_layers);
  check.positive("vision_config.num_attention_heads", num_attention_heads);
  check.positive("vision_config.image_size", image_size);
  check.positive("vision_config.patch_size", patch_size);
  check.at_most("vision_config.hidden_size", hidden_size, 1 << 20);
  check.at_most("vision_config.intermediate_size", intermediate_size, 1 << 22);
  check.at_most("vision_config.num_hidden_layers", num_hidden_layers, 4096);
  check.at_most("vision_config.image_size", image_size, 1 << 15);
  if (hidden_size % num_attention_heads != 0)
    check.fail("vision_config.hidden_size=" + std::to_string(hidden_size) +
               " is not a multiple of vision_config.num_attention_heads=" + std::to_string(num_attention_heads));
  if (image_size % patch_size != 0)
    check.fail("vision_config.image_size=" + std::to_string(image_size) +
               " is not a multiple of vision_config.patch_size=" + std::to_string(patch_size));
}

std::int64_t Blip2QFormerConfig::parameter_count() const {
  const std::int64_t q = hidden_size, e = encoder_hidden_size, i = intermediate_size;
  const std::int64_t self = 3 * (q * q + q) + q * q + q + 2 * q;            // query, key, value; output dense, LayerNorm
  const std::int64_t cross = q * q + q + 2 * (e * q + q) + q * q + q + 2 * q;  // key, value from the image features
  const std::int64_t feed_forward = q * i + i + i * q + q + 2 * q;          // intermediate_query, output_query
  std::int64_t n = 2 * q;                                                    // the LayerNorm on the queries
  for (std::int64_t l = 0; l < num_hidden_layers; ++l) n += self + feed_forward + (cross_attends(l) ? cross : 0);
  return n;
}

void Blip2QFormerConfig::validate(std::string_view origin) const {
  const ShapeCheck check{origin, "BLIP-2 Q-Former"};
  check.positive("qformer_config.hidden_size", hidden_size);
  check.positive("qformer_config.num_hidden_layers", num_hidden_layers);
  check.positive("qformer_config.num_attention_heads", num_attention_heads);
  check.positive("qformer_config.intermediate_size", intermediate_size);
  check.positive("qformer_config.cross_attention_frequency", cross_attention_frequency);
  check.positive("qformer_config.encoder_hidden_size", encoder_hidden_size);
  check.at_most("qformer_config.hidden_size", hidden_size, 1 << 20);
  check.at_most("qformer_config.intermediate_size", intermediate_size, 1 << 22);
  check.at_most("qformer_config.num_hidden_layers", num_hidden_layers, 4096);
  check.at_most("qformer_config.encoder_hidden_size", encoder_hidden_size, 1 << 20);
  if (hidden_size % num_attention_heads != 0)
    check.fail("qformer_config.hidden_size=" + std::to_string(hidden_size) +
               " is not a multiple of qformer_config.num_attention_heads=" + std::to_string(num_attention_heads));
}

template <class LmConfig>
void Blip2Config<LmConfig>::validate(std::string_view origin) const {
  vision.validate(origin);
  qformer.validate(origin);
  text.validate(origin);
  const ShapeCheck check{origin, "BLIP-2"};
  check.positive("num_query_tokens", num_query_tokens);
  check.at_most("num_query_tokens", num_query_tokens, 1 << 16);
  if (qformer.encoder_hidden_size != vision.hidden_size)
    check.fail("qformer_config.encoder_hidden_size=" + std::to_string(qformer.encoder_hidden_size) +
               " differs from vision_config.hidden_size=" + std::to_string(vision.hidden_size) +
               "; the Q-Former cross-attends to the vision model's output, so the two must be equal");
}

template struct Blip2Config<OptConfig>;
template struct Blip2Config<T5Config>;

std::span<const std::string_view> blip2_opt_preset_names() {
  static const auto names = io::preset_names(opt_presets());
  return names;
}
Blip2Config<OptConfig> blip2_opt_preset(std::string_view name) {
  return io::find_preset(opt_presets(), name, "BLIP-2 OPT");
}
std::span<const std::string_view> blip2_t5_preset_names() {
  static const auto names = io::preset_names(t5_presets());
  return names;
}
Blip2Config<T5Config> blip2_t5_preset(std::string_view name) {
  return io::find_preset(t5_presets(), name, "BLIP-2 T5");
}

}  // namespace tessera::models
