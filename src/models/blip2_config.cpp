#include "tessera/models/blip2_config.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/io/hf_config_json.hpp"
#include "tessera/io/json_file.hpp"
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

// image_token_index: the published checkpoints' (50265 for OPT, 32100 for Flan-T5, each the first id the
// processor's tokenizer added); tiny: the last id of the vocabulary.
template <class LmConfig>
Blip2Config<LmConfig> make(LmConfig text, bool tiny, std::int64_t image_token_index) {
  Blip2Config<LmConfig> c;
  c.image_token_index = tiny ? text.vocab_size - 1 : image_token_index;
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
      {"tiny", make(opt_preset("tiny"), true, 0)},
      {"blip2-opt-2.7b", make(opt_preset("opt-2.7b"), false, 50265)},
      {"blip2-opt-6.7b", make(opt_preset("opt-6.7b"), false, 50265)},
  }};
  return table;
}

const std::array<std::pair<std::string_view, Blip2Config<T5Config>>, 3>& t5_presets() {
  static const std::array<std::pair<std::string_view, Blip2Config<T5Config>>, 3> table{{
      {"tiny", make(t5_preset("tiny"), true, 0)},
      {"blip2-flan-t5-xl", make(t5_preset("flan-t5-xl"), false, 32100)},
      {"blip2-flan-t5-xxl", make(t5_preset("flan-t5-xxl"), false, 32100)},
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
  if (image_token_index < 0 || image_token_index >= text_vocab_size(text))
    check.fail("image_token_index=" + std::to_string(image_token_index) + " is not a token id below text_config's "
               "vocab_size=" + std::to_string(text_vocab_size(text)));
  if (qformer.encoder_hidden_size != vision.hidden_size)
    check.fail("qformer_config.encoder_hidden_size=" + std::to_string(qformer.encoder_hidden_size) +
               " differs from vision_config.hidden_size=" + std::to_string(vision.hidden_size) +
               "; the Q-Former cross-attends to the vision model's output, so the two must be equal");
}

template struct Blip2Config<OptConfig>;
template struct Blip2Config<T5Config>;

namespace {

Blip2VisionConfig read_vision(const io::HfConfigJson& f) {
  Blip2VisionConfig v;
  if (const std::string act = f.string_or("hidden_act", "gelu"); act != "gelu")
    throw FormatError(f.where() + ": \"hidden_act\" " + io::json_excerpt(act, 40) +
                      " is not supported; tessera's BLIP-2 vision model computes \"gelu\", as the published ones");
  if (!f.boolean_or("qkv_bias", true))
    throw FormatError(f.where() + ": \"qkv_bias\": false is not supported; tessera's BLIP-2 vision model has the "
                                  "qkv bias of the published ones");
  v.hidden_size = f.present("hidden_size") ? f.integer("hidden_size") : v.hidden_size;
  v.intermediate_size = f.present("intermediate_size") ? f.integer("intermediate_size") : v.intermediate_size;
  v.num_hidden_layers = f.present("num_hidden_layers") ? f.integer("num_hidden_layers") : v.num_hidden_layers;
  v.num_attention_heads = f.present("num_attention_heads") ? f.integer("num_attention_heads") : v.num_attention_heads;
  v.image_size = f.present("image_size") ? f.integer("image_size") : v.image_size;
  v.patch_size = f.present("patch_size") ? f.integer("patch_size") : v.patch_size;
  v.layer_norm_eps = f.number_or("layer_norm_eps", v.layer_norm_eps);
  return v;
}

Blip2QFormerConfig read_qformer(const io::HfConfigJson& f) {
  Blip2QFormerConfig q;
  if (const std::string act = f.string_or("hidden_act", "gelu"); act != "gelu")
    throw FormatError(f.where() + ": \"hidden_act\" " + io::json_excerpt(act, 40) +
                      " is not supported; tessera's Q-Former computes \"gelu\", as the published ones");
  if (f.boolean_or("use_qformer_text_input", false))
    throw FormatError(f.where() + ": \"use_qformer_text_input\": true is not supported; "
                                  "Blip2ForConditionalGeneration never runs the Q-Former's text path, and tessera's "
                                  "Q-Former has none");
  q.hidden_size = f.present("hidden_size") ? f.integer("hidden_size") : q.hidden_size;
  q.num_hidden_layers = f.present("num_hidden_layers") ? f.integer("num_hidden_layers") : q.num_hidden_layers;
  q.num_attention_heads = f.present("num_attention_heads") ? f.integer("num_attention_heads") : q.num_attention_heads;
  q.intermediate_size = f.present("intermediate_size") ? f.integer("intermediate_size") : q.intermediate_size;
  q.cross_attention_frequency =
      f.present("cross_attention_frequency") ? f.integer("cross_attention_frequency") : q.cross_attention_frequency;
  q.layer_norm_eps = f.number_or("layer_norm_eps", q.layer_norm_eps);
  return q;
}

OptConfig read_text(const io::HfConfigJson& top, OptConfig*) {
  return read_opt_config(top.nested("text_config", "opt", "BLIP-2 OPT"));
}
T5Config read_text(const io::HfConfigJson& top, T5Config*) {
  // A saved language_model.lm_head.weight makes the head untied, as for a T5 of its own (models/t5_config.hpp).
  const std::filesystem::path dir = std::filesystem::path(top.where()).parent_path();
  std::error_code ec;
  const bool has_weights = std::filesystem::exists(dir / "model.safetensors", ec) ||
                           std::filesystem::exists(dir / "model.safetensors.index.json", ec);
  const bool own_head = has_weights && io::CheckpointDir::open(dir).find("language_model.lm_head.weight") != nullptr;
  return read_t5_config(top.nested("text_config", "t5", "BLIP-2 T5"), own_head);
}
nlohmann::json text_json(const OptConfig& c, std::string_view dtype) {
  return nlohmann::json::parse(opt_config_json(c, dtype, -1));
}
nlohmann::json text_json(const T5Config& c, std::string_view dtype) {
  return nlohmann::json::parse(t5_config_json(c, dtype, -1));
}

}  // namespace

template <class LmConfig>
Blip2Config<LmConfig> read_blip2_config(const std::filesystem::path& path) {
  const io::HfConfigJson file(path, "blip-2", "BLIP-2");
  Blip2Config<LmConfig> c;
  c.vision = read_vision(file.nested("vision_config", "blip_2_vision_model", "BLIP-2 vision model"));
  c.qformer = read_qformer(file.nested("qformer_config", "blip_2_qformer", "BLIP-2 Q-Former"));
  c.qformer.encoder_hidden_size = c.vision.hidden_size;  // Blip2Config sets it so, whatever the file says
  c.text = read_text(file, static_cast<LmConfig*>(nullptr));
  c.num_query_tokens = file.present("num_query_tokens") ? file.integer("num_query_tokens") : 32;
  if (!file.present("image_token_index") && !file.present("image_token_id"))
    throw FormatError(file.where() + ": no \"image_token_index\"; transformers' Blip2ForConditionalGeneration "
                                     "finds the query positions by it (the published configs have it: 50265 for "
                                     "OPT, 32100 for Flan-T5)");
  c.image_token_index = file.integer(file.present("image_token_index") ? "image_token_index" : "image_token_id");
  c.initializer_range = file.number_or("initializer_range", 0.02);
  return file.checked(c);
}

template <class LmConfig>
std::string blip2_config_json(const Blip2Config<LmConfig>& c, std::string_view dtype, int indent) {
  const Blip2VisionConfig& v = c.vision;
  const Blip2QFormerConfig& q = c.qformer;
  const nlohmann::json j = {
      {"architectures", {"Blip2ForConditionalGeneration"}},
      {"model_type", "blip-2"},
      {"num_query_tokens", c.num_query_tokens},
      {"image_token_index", c.image_token_index},
      {"initializer_range", c.initializer_range},
      {"initializer_factor", 1.0},
      {"vision_config",
       {{"model_type", "blip_2_vision_model"}, {"hidden_size", v.hidden_size},
        {"intermediate_size", v.intermediate_size}, {"num_hidden_layers", v.num_hidden_layers},
        {"num_attention_heads", v.num_attention_heads}, {"image_size", v.image_size}, {"patch_size", v.patch_size},
        {"layer_norm_eps", v.layer_norm_eps}, {"hidden_act", "gelu"}, {"qkv_bias", true},
        {"attention_dropout", 0.0}}},
      {"qformer_config",
       {{"model_type", "blip_2_qformer"}, {"hidden_size", q.hidden_size}, {"num_hidden_layers", q.num_hidden_layers},
        {"num_attention_heads", q.num_attention_heads}, {"intermediate_size", q.intermediate_size},
        {"cross_attention_frequency", q.cross_attention_frequency}, {"encoder_hidden_size", q.encoder_hidden_size},
        {"layer_norm_eps", q.layer_norm_eps}, {"hidden_act", "gelu"}, {"use_qformer_text_input", false},
        // What tessera computed with; the published checkpoints say 0.1.
        {"hidden_dropout_prob", 0.0}, {"attention_probs_dropout_prob", 0.0}}},
      {"text_config", text_json(c.text, dtype)},
      {"torch_dtype", std::string(dtype)},
      {"dtype", std::string(dtype)},
  };
  return j.dump(indent);
}

template <class LmConfig>
void write_blip2_config(const std::filesystem::path& path, const Blip2Config<LmConfig>& c, std::string_view dtype) {
  io::write_config_json(path, blip2_config_json(c, dtype, 2));
}

template Blip2Config<OptConfig> read_blip2_config<OptConfig>(const std::filesystem::path&);
template Blip2Config<T5Config> read_blip2_config<T5Config>(const std::filesystem::path&);
template std::string blip2_config_json<OptConfig>(const Blip2Config<OptConfig>&, std::string_view, int);
template std::string blip2_config_json<T5Config>(const Blip2Config<T5Config>&, std::string_view, int);
template void write_blip2_config<OptConfig>(const std::filesystem::path&, const Blip2Config<OptConfig>&,
                                            std::string_view);
template void write_blip2_config<T5Config>(const std::filesystem::path&, const Blip2Config<T5Config>&,
                                           std::string_view);

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
