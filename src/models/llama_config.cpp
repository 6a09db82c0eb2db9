#include "tessera/models/llama_config.hpp"

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/io/hf_config_json.hpp"
#include "tessera/models/shape_check.hpp"
#include "tessera/io/json_file.hpp"

namespace tessera::models {
namespace {

// Published shapes. tiny: a 4-block GQA model of about 5M parameters for CPU runs and tests.
// llama-1b: TinyLlama-1.1B's shape. open-llama-*: openlm-research/open_llama_{3b,7b,13b}.
// code-llama-7b: codellama/CodeLlama-7b-hf (vocab 32016, rope_theta 1e6).
LlamaConfig make(std::int64_t vocab, std::int64_t hidden, std::int64_t inter, std::int64_t layers, std::int64_t heads,
                 std::int64_t kv_heads, double eps, double theta, std::int64_t max_pos) {
  LlamaConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.rms_norm_eps = eps;
  c.rope_theta = theta;
  c.max_position_embeddings = max_pos;
  return c;
}

const std::array<std::pair<std::string_view, LlamaConfig>, 7>& presets() {
  static const std::array<std::pair<std::string_view, LlamaConfig>, 7> table{{
      {"micro", make(512, 64, 172, 2, 4, 2, 1e-5, 10000.0, 1024)},
      {"tiny", make(4096, 256, 688, 4, 8, 4, 1e-5, 10000.0, 1024)},
      {"llama-1b", make(32000, 2048, 5632, 22, 32, 4, 1e-5, 10000.0, 2048)},
      {"open-llama-3b", make(32000, 3200, 8640, 26, 32, 32, 1e-6, 10000.0, 2048)},
      {"open-llama-7b", make(32000, 4096, 11008, 32, 32, 32, 1e-6, 10000.0, 2048)},
      {"open-llama-13b", make(32000, 5120, 13824, 40, 40, 40, 1e-6, 10000.0, 2048)},
      {"code-llama-7b", make(32016, 4096, 11008, 32, 32, 32, 1e-5, 1000000.0, 16384)},
  }};
  return table;
}

}  // namespace

double LlamaConfig::training_flops_per_token(std::int64_t seq_len) const {
  const double c = static_cast<double>(hidden_size), q = static_cast<double>(head_dim);
  const double h = static_cast<double>(num_attention_heads), kv = static_cast<double>(num_key_value_heads);
  const double layers = static_cast<double>(num_hidden_layers);
  const double per_layer = 2.0 * c * h * q + 2.0 * c * kv * q + 3.0 * c * static_cast<double>(intermediate_size);
  const double matmul_weights = layers * per_layer + c * static_cast<double>(vocab_size);
  return 6.0 * matmul_weights + 12.0 * layers * h * q * static_cast<double>(seq_len);
}

std::int64_t LlamaConfig::parameter_count() const {
  const std::int64_t q = hidden_size * num_attention_heads * head_dim;
  const std::int64_t kv = 2 * hidden_size * num_key_value_heads * head_dim;
  const std::int64_t o = num_attention_heads * head_dim * hidden_size;
  const std::int64_t mlp = 3 * hidden_size * intermediate_size;
  const std::int64_t norms = 2 * hidden_size;
  const std::int64_t per_block = q + kv + o + mlp + norms;
  const std::int64_t embed = vocab_size * hidden_size;
  return embed + num_hidden_layers * per_block + hidden_size + (tie_word_embeddings ? 0 : embed);
}

void LlamaConfig::validate(std::string_view origin) const {
  const ShapeCheck check{origin, "Llama"};
  check.positive("vocab_size", vocab_size);
  check.positive("hidden_size", hidden_size);
  check.positive("intermediate_size", intermediate_size);
  check.positive("num_hidden_layers", num_hidden_layers);
  check.positive("num_attention_heads", num_attention_heads);
  check.positive("num_key_value_heads", num_key_value_heads);
  check.positive("head_dim", head_dim);
  check.positive("max_position_embeddings", max_position_embeddings);
  // Wider than any published Llama by far, and small enough that every parameter count fits in 64 bits.
  check.at_most("hidden_size", hidden_size, 1 << 20);
  check.at_most("intermediate_size", intermediate_size, 1 << 22);
  check.at_most("num_hidden_layers", num_hidden_layers, 4096);
  check.at_most("num_attention_heads", num_attention_heads, 1 << 16);
  check.at_most("num_key_value_heads", num_key_value_heads, 1 << 16);
  check.at_most("head_dim", head_dim, 1 << 16);
  if (num_attention_heads % num_key_value_heads != 0)
    check.fail("num_attention_heads=" + std::to_string(num_attention_heads) + " is not a multiple of num_key_value_heads=" +
               std::to_string(num_key_value_heads) + "; grouped-query attention needs whole groups");
  if (head_dim % 2 != 0) check.fail("head_dim=" + std::to_string(head_dim) + " must be even for rotary embeddings");
  check.token_file_vocab(vocab_size);
  if (!(rms_norm_eps > 0)) check.fail("rms_norm_eps must be positive");
  if (!(rope_theta > 0)) check.fail("rope_theta must be positive");
}

std::span<const std::string_view> llama_preset_names() {
  static const auto names = io::preset_names(presets());
  return names;
}

LlamaConfig llama_preset(std::string_view name) { return io::find_preset(presets(), name, "Llama"); }

LlamaConfig read_llama_config(const std::filesystem::path& path) {
  const io::HfConfigJson file(path, "llama", "Llama");
  const std::string& where = file.where();
  const nlohmann::json& j = file.json();
  if (file.present("rope_scaling"))
    throw FormatError(where + ": rope_scaling " + io::json_excerpt(j.at("rope_scaling")) +
                      " is not supported; use a checkpoint with plain rotary embeddings (rope_scaling null)");
  for (const char* bias : {"attention_bias", "mlp_bias"})
    if (file.boolean_or(bias, false))
      throw FormatError(where + ": \"" + std::string(bias) + "\": true is not supported (Llama has no biases)");
  if (const std::string act = file.string_or("hidden_act", "silu"); act != "silu")
    throw FormatError(where + ": hidden_act " + io::json_excerpt(act, 80) + " is not supported; Llama uses \"silu\"");

  LlamaConfig c;
  c.vocab_size = file.integer("vocab_size");
  c.hidden_size = file.integer("hidden_size");
  c.intermediate_size = file.integer("intermediate_size");
  c.num_hidden_layers = file.integer("num_hidden_layers");
  c.num_attention_heads = file.integer("num_attention_heads");
  c.num_key_value_heads = file.present("num_key_value_heads") ? file.integer("num_key_value_heads") : c.num_attention_heads;
  c.head_dim = file.present("head_dim") ? file.integer("head_dim") : c.hidden_size / std::max<std::int64_t>(1, c.num_attention_heads);
  c.max_position_embeddings = file.present("max_position_embeddings") ? file.integer("max_position_embeddings") : 2048;
  c.rms_norm_eps = file.number_or("rms_norm_eps", 1e-6);
  c.rope_theta = file.number_or("rope_theta", 10000.0);
  // transformers 5 writes the rotary settings as "rope_parameters": {"rope_type": "default", "rope_theta": x}.
  if (file.present("rope_parameters")) {
    const nlohmann::json& rope = j.at("rope_parameters");
    if (!rope.is_object()) throw file.wrong("rope_parameters", "an object", rope);
    const nlohmann::json type = rope.value("rope_type", nlohmann::json("default"));
    if (type != "default")
      throw FormatError(where + ": rope_parameters " + io::json_excerpt(rope) +
                        " is not supported; tessera's Llama has plain rotary embeddings (rope_type \"default\")");
    if (rope.contains("rope_theta")) {
      if (!rope.at("rope_theta").is_number()) throw file.wrong("rope_parameters.rope_theta", "a number", rope.at("rope_theta"));
      c.rope_theta = rope.at("rope_theta").get<double>();
    }
  }
  c.initializer_range = file.number_or("initializer_range", 0.02);
  c.tie_word_embeddings = file.boolean_or("tie_word_embeddings", false);
  return file.checked(c);
}

std::string llama_config_json(const LlamaConfig& c, std::string_view torch_dtype, int indent) {
  const nlohmann::json j = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"initializer_range", c.initializer_range},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"torch_dtype", std::string(torch_dtype)},
  };
  return j.dump(indent);
}

void write_llama_config(const std::filesystem::path& path, const LlamaConfig& c, std::string_view torch_dtype) {
  io::write_config_json(path, llama_config_json(c, torch_dtype, 2));
}

}  // namespace tessera::models
