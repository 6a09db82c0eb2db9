#include "tessera/models/vit_config.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/io/hf_config_json.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/models/shape_check.hpp"

namespace tessera::models {
namespace {

// Published shapes: google/vit-base-patch16-224 and google/vit-large-patch16-224 (ImageNet-1k heads), and the
// ViT-H/14 backbone of google/vit-huge-patch14-224-in21k with a 1000-class head. tiny: 4 blocks of width 256 on
// 32x32 images in 4x4 patches (65 positions) and 10 classes, about 3.2M parameters, for CPU runs and tests.
VitConfig make(std::int64_t hidden, std::int64_t layers, std::int64_t heads, std::int64_t inter, std::int64_t image,
               std::int64_t patch, std::int64_t labels) {
  VitConfig c;
  c.hidden_size = hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.intermediate_size = inter;
  c.image_size = image;
  c.patch_size = patch;
  c.num_labels = labels;
  return c;
}

const std::array<std::pair<std::string_view, VitConfig>, 4>& presets() {
  static const std::array<std::pair<std::string_view, VitConfig>, 4> table{{
      {"tiny", make(256, 4, 8, 1024, 32, 4, 10)},
      {"vit-base-patch16-224", make(768, 12, 12, 3072, 224, 16, 1000)},
      {"vit-large-patch16-224", make(1024, 24, 16, 4096, 224, 16, 1000)},
      {"vit-huge-patch14-224", make(1280, 32, 16, 5120, 224, 14, 1000)},
  }};
  return table;
}

std::string label_name(const VitConfig& c, std::int64_t i) {
  return c.labels.empty() ? "LABEL_" + std::to_string(i) : c.labels[static_cast<std::size_t>(i)];
}

}  // namespace

std::int64_t VitConfig::parameter_count() const {
  const std::int64_t h = hidden_size;
  const std::int64_t patch = h * num_channels * patch_size * patch_size + h;  // the convolution with its bias
  const std::int64_t embeddings = patch + h /* CLS */ + seq_len() * h /* positions */;
  const std::int64_t attention = 4 * (h * h + h);  // query, key, value, output.dense with biases
  const std::int64_t mlp = h * intermediate_size + intermediate_size + intermediate_size * h + h;
  const std::int64_t norms = 2 * 2 * h;
  return embeddings + num_hidden_layers * (attention + mlp + norms) + 2 * h + num_labels * h + num_labels;
}

void VitConfig::validate(std::string_view origin) const {
  const ShapeCheck check{origin, "ViT"};
  check.positive("hidden_size", hidden_size);
  check.positive("num_hidden_layers", num_hidden_layers);
  check.positive("num_attention_heads", num_attention_heads);
  check.positive("intermediate_size", intermediate_size);
  check.positive("image_size", image_size);
  check.positive("patch_size", patch_size);
  check.positive("num_channels", num_channels);
  check.positive("num_labels", num_labels);
  // Far beyond any published ViT (ViT-22B: 6144 wide, 48 layers), and small enough for 64-bit counts.
  check.at_most("hidden_size", hidden_size, 1 << 20);
  check.at_most("intermediate_size", intermediate_size, 1 << 22);
  check.at_most("num_hidden_layers", num_hidden_layers, 4096);
  check.at_most("num_attention_heads", num_attention_heads, 1 << 16);
  check.at_most("image_size", image_size, 1 << 14);
  check.at_most("num_channels", num_channels, 64);
  check.at_most("num_labels", num_labels, 1 << 20);
  if (hidden_size % num_attention_heads != 0)
    check.fail("hidden_size=" + std::to_string(hidden_size) + " is not a multiple of num_attention_heads=" +
               std::to_string(num_attention_heads) + "; every head needs hidden_size / num_attention_heads channels");
  if (image_size % patch_size != 0)
    check.fail("image_size=" + std::to_string(image_size) + " is not a multiple of patch_size=" +
               std::to_string(patch_size) + "; the patches must tile the image");
  if (num_labels < 2)
    check.fail("num_labels=" + std::to_string(num_labels) +
               ": tessera trains ViT as a single-label classifier (cross-entropy), which needs at least 2 classes");
  if (!labels.empty() && static_cast<std::int64_t>(labels.size()) != num_labels)
    check.fail(std::to_string(labels.size()) + " label names for num_labels=" + std::to_string(num_labels));
  if (!(layer_norm_eps > 0)) check.fail("layer_norm_eps must be > 0");
  if (!(initializer_range >= 0))
    check.fail("initializer_range=" + std::to_string(initializer_range) + " must be a non-negative standard deviation");
}

std::span<const std::string_view> vit_preset_names() {
  static const auto names = io::preset_names(presets());
  return names;
}

VitConfig vit_preset(std::string_view name) { return io::find_preset(presets(), name, "ViT"); }

VitConfig read_vit_config(const std::filesystem::path& path) {
  const io::HfConfigJson file(path, "vit", "ViT");
  const std::string& where = file.where();
  const nlohmann::json& j = file.json();
  if (const std::string act = file.string_or("hidden_act", "gelu"); act != "gelu")
    throw FormatError(where + ": \"hidden_act\" " + io::json_excerpt(act, 80) +
                      " is not supported; tessera's ViT computes \"gelu\" (exact, erf), as the published checkpoints");
  if (!file.boolean_or("qkv_bias", true))
    throw FormatError(where + ": \"qkv_bias\": false is not supported; tessera's ViT has the query, key and value "
                              "biases of every published ViT checkpoint");

  VitConfig c;
  c.hidden_size = file.integer("hidden_size");
  c.num_hidden_layers = file.integer("num_hidden_layers");
  c.num_attention_heads = file.integer("num_attention_heads");
  c.intermediate_size = file.integer("intermediate_size");
  c.image_size = file.present("image_size") ? file.integer("image_size") : 224;
  c.patch_size = file.present("patch_size") ? file.integer("patch_size") : 16;
  c.num_channels = file.present("num_channels") ? file.integer("num_channels") : 3;
  c.layer_norm_eps = file.number_or("layer_norm_eps", 1e-12);
  c.initializer_range = file.number_or("initializer_range", 0.02);
  // id2label {"0": "tench", ...} names the classes; without it, num_labels (PretrainedConfig's default 2).
  if (j.contains("id2label") && j.at("id2label").is_object()) {
    const nlohmann::json& ids = j.at("id2label");
    c.num_labels = static_cast<std::int64_t>(ids.size());
    for (std::int64_t i = 0; i < c.num_labels; ++i) {
      const std::string key = std::to_string(i);
      if (!ids.contains(key) || !ids.at(key).is_string())
        throw FormatError(where + ": \"id2label\" has " + std::to_string(c.num_labels) + " entries but no name for id " +
                          key + "; ids must be 0 .. " + std::to_string(c.num_labels - 1));
      c.labels.push_back(ids.at(key).get<std::string>());
    }
  } else {
    c.num_labels = file.present("num_labels") ? file.integer("num_labels") : 2;
  }
  return file.checked(c);
}

std::string vit_config_json(const VitConfig& c, std::string_view torch_dtype, int indent) {
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (std::int64_t i = 0; i < c.num_labels; ++i) {
    id2label[std::to_string(i)] = label_name(c, i);
    label2id[label_name(c, i)] = i;
  }
  const nlohmann::json j = {
      {"architectures", {"ViTForImageClassification"}},
      {"model_type", "vit"},
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"intermediate_size", c.intermediate_size},
      {"hidden_act", "gelu"},
      {"image_size", c.image_size},
      {"patch_size", c.patch_size},
      {"num_channels", c.num_channels},
      {"qkv_bias", true},
      {"layer_norm_eps", c.layer_norm_eps},
      {"initializer_range", c.initializer_range},
      {"encoder_stride", c.patch_size},
      {"id2label", id2label},
      {"label2id", label2id},
      // What tessera computed with (see vit_config.hpp).
      {"hidden_dropout_prob", 0.0},
      {"attention_probs_dropout_prob", 0.0},
      // transformers 4 reads torch_dtype, transformers 5 dtype.
      {"torch_dtype", std::string(torch_dtype)},
      {"dtype", std::string(torch_dtype)},
  };
  return j.dump(indent);
}

void write_vit_config(const std::filesystem::path& path, const VitConfig& c, std::string_view torch_dtype) {
  io::write_config_json(path, vit_config_json(c, torch_dtype, 2));
}

}  // namespace tessera::models
