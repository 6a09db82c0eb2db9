#include "tessera/models/t5_config.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/io/hf_config_json.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/models/shape_check.hpp"

namespace tessera::models {
namespace {

// Published shapes: google/flan-t5-{small,base,large,xl,xxl} on the Hugging Face hub (vocab 32128, gated-gelu,
// untied lm_head, 32 buckets up to distance 128). tiny: 3 + 3 blocks of width 256 (~6.6M parameters) for CPU runs
// and tests.
T5Config make(std::int64_t vocab, std::int64_t d_model, std::int64_t d_kv, std::int64_t d_ff, std::int64_t layers,
              std::int64_t heads) {
  T5Config c;
  c.vocab_size = vocab;
  c.d_model = d_model;
  c.d_kv = d_kv;
  c.d_ff = d_ff;
  c.num_layers = layers;
  c.num_decoder_layers = layers;
  c.num_heads = heads;
  return c;
}

const std::array<std::pair<std::string_view, T5Config>, 6>& presets() {
  static const std::array<std::pair<std::string_view, T5Config>, 6> table{{
      {"tiny", make(4096, 256, 32, 512, 3, 8)},
      {"flan-t5-small", make(32128, 512, 64, 1024, 8, 6)},
      {"flan-t5-base", make(32128, 768, 64, 2048, 12, 12)},
      {"flan-t5-large", make(32128, 1024, 64, 2816, 24, 16)},
      {"flan-t5-xl", make(32128, 2048, 64, 5120, 24, 32)},
      {"flan-t5-xxl", make(32128, 4096, 64, 10240, 24, 64)},
  }};
  return table;
}

// Whether the weights next to config.json hold their own lm_head.weight (headers only; no weights: false).
bool checkpoint_has_lm_head(const std::filesystem::path& config_json) {
  const std::filesystem::path dir = config_json.parent_path();
  std::error_code ec;
  if (!std::filesystem::exists(dir / "model.safetensors", ec) &&
      !std::filesystem::exists(dir / "model.safetensors.index.json", ec))
    return false;
  return io::CheckpointDir::open(dir).find("lm_head.weight") != nullptr;
}

}  // namespace

std::int64_t T5Config::parameter_count() const {
  const std::int64_t d = d_model, inner = inner_dim();
  const std::int64_t attention = 4 * d * inner;  // q, k, v (inner, d) and o (d, inner), no biases
  const std::int64_t ff = (gated_gelu ? 3 : 2) * d * d_ff;
  const std::int64_t table = relative_attention_num_buckets * num_heads;
  const std::int64_t encoder = num_layers * (attention + ff + 2 * d) + table + d;
  const std::int64_t decoder = num_decoder_layers * (2 * attention + ff + 3 * d) + table + d;
  const std::int64_t embed = vocab_size * d;
  return embed + encoder + decoder + (tie_word_embeddings ? 0 : embed);
}

void T5Config::validate(std::string_view origin) const {
  const ShapeCheck check{origin, "T5"};
  check.positive("vocab_size", vocab_size);
  check.positive("d_model", d_model);
  check.positive("d_kv", d_kv);
  check.positive("d_ff", d_ff);
  check.positive("num_layers", num_layers);
  check.positive("num_decoder_layers", num_decoder_layers);
  check.positive("num_heads", num_heads);
  // Far beyond any published T5 (t5-11b: d_model 1024, d_ff 65536, 128 heads of 128), and small enough that every
  // parameter count fits in 64 bits.
  check.at_most("d_model", d_model, 1 << 20);
  check.at_most("d_kv", d_kv, 1 << 16);
  check.at_most("d_ff", d_ff, 1 << 22);
  check.at_most("num_layers", num_layers, 4096);
  check.at_most("num_decoder_layers", num_decoder_layers, 4096);
  check.at_most("num_heads", num_heads, 1 << 16);
  check.at_most("relative_attention_num_buckets", relative_attention_num_buckets, 1 << 16);
  check.at_most("relative_attention_max_distance", relative_attention_max_distance, 1 << 24);
  check.token_file_vocab(vocab_size);
  // The encoder's buckets: half per direction, half of those exact; the rest log-spaced up to max_distance.
  if (relative_attention_num_buckets < 4)
    check.fail("relative_attention_num_buckets=" + std::to_string(relative_attention_num_buckets) +
               " is too few: the encoder splits them by direction and then into exact and log-spaced halves, so at "
               "least 4 are needed (published T5: 32)");
  if (relative_attention_max_distance <= relative_attention_num_buckets / 2)
    check.fail("relative_attention_max_distance=" + std::to_string(relative_attention_max_distance) +
               " must exceed relative_attention_num_buckets / 2 = " +
               std::to_string(relative_attention_num_buckets / 2) +
               ", where the log-spaced buckets begin (published T5: 128 with 32 buckets)");
  auto token = [&](std::string_view key, std::int64_t id) {
    if (id < 0 || id >= vocab_size)
      check.fail(std::string(key) + "=" + std::to_string(id) + " is not a token id below vocab_size=" +
                 std::to_string(vocab_size));
  };
  token("pad_token_id", pad_token_id);
  token("decoder_start_token_id", decoder_start_token_id);
  if (!(layer_norm_epsilon > 0))
    check.fail("layer_norm_epsilon=" + std::to_string(layer_norm_epsilon) + " must be positive");
  if (!(initializer_range >= 0))
    check.fail("initializer_factor=" + std::to_string(initializer_range) + " must be non-negative");
}

std::span<const std::string_view> t5_preset_names() {
  static const auto names = io::preset_names(presets());
  return names;
}

T5Config t5_preset(std::string_view name) { return io::find_preset(presets(), name, "T5"); }

T5Config read_t5_config(const std::filesystem::path& path) {
  return read_t5_config(io::HfConfigJson(path, "t5", "T5"), checkpoint_has_lm_head(path));
}

T5Config read_t5_config(const io::HfConfigJson& file, bool checkpoint_has_own_lm_head) {
  const std::string& where = file.where();
  T5Config c;
  const std::string ff = file.string_or("feed_forward_proj", "relu");
  if (ff != "gated-gelu" && ff != "relu")
    throw FormatError(where + ": \"feed_forward_proj\" " + io::json_excerpt(ff, 80) +
                      " is not supported; tessera's T5 computes \"gated-gelu\" (v1.1, Flan-T5) or \"relu\" (the "
                      "original T5)");
  c.gated_gelu = ff == "gated-gelu";
  c.vocab_size = file.integer("vocab_size");
  c.d_model = file.integer("d_model");
  c.d_kv = file.integer("d_kv");
  c.d_ff = file.integer("d_ff");
  c.num_layers = file.integer("num_layers");
  c.num_decoder_layers = file.present("num_decoder_layers") ? file.integer("num_decoder_layers") : c.num_layers;
  c.num_heads = file.integer("num_heads");
  c.relative_attention_num_buckets =
      file.present("relative_attention_num_buckets") ? file.integer("relative_attention_num_buckets") : 32;
  c.relative_attention_max_distance =
      file.present("relative_attention_max_distance") ? file.integer("relative_attention_max_distance") : 128;
  c.layer_norm_epsilon = file.number_or("layer_norm_epsilon", 1e-6);
  c.initializer_range = file.number_or("initializer_factor", 1.0);
  c.pad_token_id = file.present("pad_token_id") ? file.integer("pad_token_id") : 0;
  c.decoder_start_token_id =
      file.present("decoder_start_token_id") ? file.integer("decoder_start_token_id") : c.pad_token_id;
  c.eos_token_id = file.present("eos_token_id") && file.json().at("eos_token_id").is_number_integer()
                       ? file.integer("eos_token_id")
                       : 1;
  // transformers: a config without tie_word_embeddings: false scales the decoder's output, unless it says
  // scale_decoder_outputs itself (transformers 5 writes both keys).
  const bool tie = file.boolean_or("tie_word_embeddings", true);
  c.scale_decoder_outputs = file.boolean_or("scale_decoder_outputs", tie);
  c.tie_word_embeddings = tie && !checkpoint_has_own_lm_head;
  return file.checked(c);
}

std::string t5_config_json(const T5Config& c, std::string_view torch_dtype, int indent) {
  const nlohmann::json j = {
      {"architectures", {"T5ForConditionalGeneration"}},
      {"model_type", "t5"},
      {"vocab_size", c.vocab_size},
      {"d_model", c.d_model},
      {"d_kv", c.d_kv},
      {"d_ff", c.d_ff},
      {"num_layers", c.num_layers},
      {"num_decoder_layers", c.num_decoder_layers},
      {"num_heads", c.num_heads},
      {"relative_attention_num_buckets", c.relative_attention_num_buckets},
      {"relative_attention_max_distance", c.relative_attention_max_distance},
      {"layer_norm_epsilon", c.layer_norm_epsilon},
      {"feed_forward_proj", c.gated_gelu ? "gated-gelu" : "relu"},
      {"is_gated_act", c.gated_gelu},
      {"dense_act_fn", c.gated_gelu ? "gelu_new" : "relu"},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"scale_decoder_outputs", c.scale_decoder_outputs},
      {"initializer_factor", c.initializer_range},
      {"is_encoder_decoder", true},
      // What tessera computed with (see t5_config.hpp); the published checkpoints say 0.1.
      {"dropout_rate", 0.0},
      {"pad_token_id", c.pad_token_id},
      {"decoder_start_token_id", c.decoder_start_token_id},
      {"eos_token_id", c.eos_token_id},
      // transformers 4 reads torch_dtype, transformers 5 dtype.
      {"torch_dtype", std::string(torch_dtype)},
      {"dtype", std::string(torch_dtype)},
  };
  return j.dump(indent);
}

void write_t5_config(const std::filesystem::path& path, const T5Config& c, std::string_view torch_dtype) {
  io::write_config_json(path, t5_config_json(c, torch_dtype, 2));
}

}  // namespace tessera::models
