#include "tessera/models/opt_config.hpp"

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

// Published shapes: facebook/opt-{125m,350m,1.3b,2.7b,6.7b} on the Hugging Face hub (vocab 50272, 2048
// positions). tiny: a 4-block pre-LN model of about 4.5M parameters for CPU runs and tests, as wide as Llama's
// tiny, with room for the default seq_len=256.
OptConfig make(std::int64_t vocab, std::int64_t hidden, std::int64_t ffn, std::int64_t layers, std::int64_t heads,
               std::int64_t max_pos, std::int64_t word_dim, bool pre_ln) {
  OptConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.ffn_dim = ffn;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.max_position_embeddings = max_pos;
  c.word_embed_proj_dim = word_dim;
  c.do_layer_norm_before = pre_ln;
  return c;
}

const std::array<std::pair<std::string_view, OptConfig>, 6>& presets() {
  static const std::array<std::pair<std::string_view, OptConfig>, 6> table{{
      {"tiny", make(4096, 256, 1024, 4, 8, 1024, 256, true)},
      {"opt-125m", make(50272, 768, 3072, 12, 12, 2048, 768, true)},
      {"opt-350m", make(50272, 1024, 4096, 24, 16, 2048, 512, false)},
      {"opt-1.3b", make(50272, 2048, 8192, 24, 32, 2048, 2048, true)},
      {"opt-2.7b", make(50272, 2560, 10240, 32, 32, 2048, 2560, true)},
      {"opt-6.7b", make(50272, 4096, 16384, 32, 32, 2048, 4096, true)},
  }};
  return table;
}

}  // namespace

double OptConfig::training_flops_per_token(std::int64_t seq_len) const {
  const double c = static_cast<double>(hidden_size), p = static_cast<double>(word_embed_proj_dim);
  const double layers = static_cast<double>(num_hidden_layers);
  const double per_layer = 4.0 * c * c + 2.0 * c * static_cast<double>(ffn_dim);
  const double projections = has_projections() ? 2.0 * p * c : 0.0;
  const double matmul_weights = layers * per_layer + projections + p * static_cast<double>(vocab_size);
  return 6.0 * matmul_weights + 12.0 * layers * c * static_cast<double>(seq_len);
}

std::int64_t OptConfig::parameter_count() const {
  const std::int64_t h = hidden_size, word = word_embed_proj_dim;
  const std::int64_t attention = 4 * (h * h + h);                  // q, k, v, out_proj with biases
  const std::int64_t mlp = h * ffn_dim + ffn_dim + ffn_dim * h + h;  // fc1, fc2 with biases
  const std::int64_t norms = 2 * 2 * h;                            // two LayerNorms, weight and bias
  const std::int64_t embed = vocab_size * word;
  const std::int64_t positions = (max_position_embeddings + 2) * h;
  const std::int64_t projections = has_projections() ? 2 * h * word : 0;
  const std::int64_t final_norm = has_final_layer_norm() ? 2 * h : 0;
  return embed + positions + projections + num_hidden_layers * (attention + mlp + norms) + final_norm +
         (tie_word_embeddings ? 0 : embed);
}

void OptConfig::validate(std::string_view origin) const {
  const ShapeCheck check{origin, "OPT"};
  check.positive("vocab_size", vocab_size);
  check.positive("hidden_size", hidden_size);
  check.positive("ffn_dim", ffn_dim);
  check.positive("num_hidden_layers", num_hidden_layers);
  check.positive("num_attention_heads", num_attention_heads);
  check.positive("max_position_embeddings", max_position_embeddings);
  check.positive("word_embed_proj_dim", word_embed_proj_dim);
  // Wider than any published OPT by far (opt-175b: 12288 wide, 96 layers), and small enough that every
  // parameter count fits in 64 bits.
  check.at_most("hidden_size", hidden_size, 1 << 20);
  check.at_most("word_embed_proj_dim", word_embed_proj_dim, 1 << 20);
  check.at_most("ffn_dim", ffn_dim, 1 << 22);
  check.at_most("num_hidden_layers", num_hidden_layers, 4096);
  check.at_most("num_attention_heads", num_attention_heads, 1 << 16);
  check.at_most("max_position_embeddings", max_position_embeddings, 1 << 20);
  if (hidden_size % num_attention_heads != 0)
    check.fail("hidden_size=" + std::to_string(hidden_size) + " is not a multiple of num_attention_heads=" +
               std::to_string(num_attention_heads) + "; every head needs hidden_size / num_attention_heads channels");
  check.token_file_vocab(vocab_size);
  if (pad_token_id < -1 || pad_token_id >= vocab_size)
    check.fail("pad_token_id=" + std::to_string(pad_token_id) + " is not a token id below vocab_size=" +
               std::to_string(vocab_size) + "; use a token id, or null for no padding token");
  if (!(initializer_range >= 0))
    check.fail("init_std=" + std::to_string(initializer_range) + " must be a non-negative standard deviation");
}

std::span<const std::string_view> opt_preset_names() {
  static const auto names = io::preset_names(presets());
  return names;
}

OptConfig opt_preset(std::string_view name) { return io::find_preset(presets(), name, "OPT"); }

OptConfig read_opt_config(const std::filesystem::path& path) { return read_opt_config(io::HfConfigJson(path, "opt", "OPT")); }

OptConfig read_opt_config(const io::HfConfigJson& file) {
  const std::string& where = file.where();
  const nlohmann::json& j = file.json();
  if (const std::string act = file.string_or("activation_function", "relu"); act != "relu")
    throw FormatError(where + ": \"activation_function\" " + io::json_excerpt(act, 80) +
                      " is not supported; tessera's OPT computes \"relu\", as every published OPT checkpoint");
  if (!file.boolean_or("enable_bias", true))
    throw FormatError(where + ": \"enable_bias\": false is not supported; tessera's OPT has the biases of every "
                              "published OPT checkpoint (enable_bias true)");
  if (!file.boolean_or("layer_norm_elementwise_affine", true))
    throw FormatError(where + ": \"layer_norm_elementwise_affine\": false is not supported; tessera's OPT has "
                              "LayerNorm weights and biases, as every published OPT checkpoint");

  OptConfig c;
  c.vocab_size = file.integer("vocab_size");
  c.hidden_size = file.integer("hidden_size");
  c.ffn_dim = file.integer("ffn_dim");
  c.num_hidden_layers = file.integer("num_hidden_layers");
  c.num_attention_heads = file.integer("num_attention_heads");
  c.max_position_embeddings = file.present("max_position_embeddings") ? file.integer("max_position_embeddings") : 2048;
  // OPTConfig: word_embed_proj_dim None means hidden_size.
  c.word_embed_proj_dim = file.present("word_embed_proj_dim") ? file.integer("word_embed_proj_dim") : c.hidden_size;
  c.do_layer_norm_before = file.boolean_or("do_layer_norm_before", true);
  c.remove_final_layer_norm = file.boolean_or("_remove_final_layer_norm", false);
  // OPTConfig's default is 1; null means no padding token.
  c.pad_token_id = !j.contains("pad_token_id") ? 1 : file.present("pad_token_id") ? file.integer("pad_token_id") : -1;
  c.initializer_range = file.number_or("init_std", 0.02);
  c.tie_word_embeddings = file.boolean_or("tie_word_embeddings", true);
  return file.checked(c);
}

std::string opt_config_json(const OptConfig& c, std::string_view torch_dtype, int indent) {
  const nlohmann::json j = {
      {"architectures", {"OPTForCausalLM"}},
      {"model_type", "opt"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"ffn_dim", c.ffn_dim},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"max_position_embeddings", c.max_position_embeddings},
      {"word_embed_proj_dim", c.word_embed_proj_dim},
      {"do_layer_norm_before", c.do_layer_norm_before},
      {"_remove_final_layer_norm", c.remove_final_layer_norm},
      {"activation_function", "relu"},
      {"enable_bias", true},
      {"layer_norm_elementwise_affine", true},
      {"init_std", c.initializer_range},
      {"tie_word_embeddings", c.tie_word_embeddings},
      // What tessera computed with (see opt_config.hpp); the published checkpoints say dropout 0.1.
      {"dropout", 0.0},
      {"attention_dropout", 0.0},
      {"layerdrop", 0.0},
      {"pad_token_id", c.pad_token_id >= 0 ? nlohmann::json(c.pad_token_id) : nlohmann::json(nullptr)},
      {"bos_token_id", 2},
      {"eos_token_id", 2},
      // transformers 4 reads torch_dtype, transformers 5 dtype.
      {"torch_dtype", std::string(torch_dtype)},
      {"dtype", std::string(torch_dtype)},
  };
  return j.dump(indent);
}

void write_opt_config(const std::filesystem::path& path, const OptConfig& c, std::string_view torch_dtype) {
  io::write_config_json(path, opt_config_json(c, torch_dtype, 2));
}

}  // namespace tessera::models
