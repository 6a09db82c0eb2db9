#pragma once
// defines: tessera::models::Vit, the ViT family with Hugging Face ViTForImageClassification semantics: the image
// cut into patch_size x patch_size patches by a strided convolution, a learned CLS token prepended, learned
// position embeddings added, pre-LN ViTLayer blocks (LayerNorm eps 1e-12, multi-head attention with biases,
// exact-GELU MLP), a final LayerNorm, a linear classifier on the CLS position, mean cross-entropy over the batch.
// No dropout: tessera trains ViT as with hidden_dropout_prob and attention_probs_dropout_prob 0.
//
// Shapes: pixels (B, C, S, S) -> patches (B, N, H), N = (S / patch_size)^2 -> hidden (B, N + 1, H)
//         -> CLS (B, H) -> logits (B, num_labels).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/core/param_spec.hpp"
#include "tessera/models/family_parts.hpp"
#include "tessera/models/model_family.hpp"
#include "tessera/models/vit_config.hpp"

namespace tessera::models {

struct Vit {
  using family = model_family_tag;
  using Config = VitConfig;
  using Batch = ImageBatch;
  static constexpr std::string_view name = "vit";
  // lora_targets=auto: PEFT's default target_modules for this architecture.
  static constexpr std::string_view lora_targets = "query,value";

  struct Context {};  // nothing depends on the run's settings: the positions are the config's

  // Shapes: a named preset, or a Hugging Face config.json (and back).
  static Config preset(std::string_view preset_name) { return vit_preset(preset_name); }
  static std::span<const std::string_view> preset_names() { return vit_preset_names(); }
  static Config read_config(const std::filesystem::path& config_json) { return read_vit_config(config_json); }
  static void write_config(const std::filesystem::path& config_json, const Config& config, std::string_view dtype) {
    write_vit_config(config_json, config, dtype);
  }
  // ViTImageProcessor's defaults: mean and std 0.5, bilinear resize.
  static ImageSpec data_spec(const Config& config);

  // Units: 0 = vit.embeddings (CLS, positions, patch convolution), 1..L = ViTLayer blocks, L+1 = vit.layernorm and
  // the classifier.
  static std::vector<ParamSpec> parameters(const Config& config);
  static std::vector<UnitInfo> units(const Config& config);
  // Calls: 0 embeddings, 1..L blocks, L+1 the loss head.
  static std::vector<CallInfo> calls(const Config& config);
  // seq_len is not used: the positions are the image's patches and the CLS token.
  static Context make_context(const Config& config, std::int64_t seq_len, c10::ScalarType compute_dtype,
                              c10::Device device);

  // call 0: {pixels (B, C, S, S)} -> (B, N + 1, H); blocks: {x} -> x; head: {x, labels (B,)} -> the mean
  // cross-entropy over the B images, fp32 scalar.
  static at::Tensor compute(const Config& config, const Context& ctx, std::size_t call, const CallWeights& w,
                            std::span<const at::Tensor> inputs);
  static at::Tensor forward(const Config& config, CallRunner& run, const Batch& batch);
};

}  // namespace tessera::models
