#pragma once
// defines: tessera::models::Blip2<Lm>, the image-to-text family with Hugging Face Blip2ForConditionalGeneration
// semantics, over Lm = Opt (blip2-opt-*) or T5 (blip2-flan-t5-*):
//   vision model  the image cut into patches by a convolution (with bias), a class embedding first, learned
//                 positions, pre-LN Blip2EncoderLayer blocks (LayerNorm eps 1e-6; one fused qkv linear whose (3H)
//                 bias Hugging Face stores whole, its key third starting at zero; 1/sqrt(d) attention; projection;
//                 exact-GELU MLP), post_layernorm
//   Q-Former      num_query_tokens learned query_tokens, a LayerNorm, then BERT-style post-LN Blip2QFormerLayer
//                 blocks (eps 1e-12): self-attention among the queries, cross-attention to the image features in
//                 every cross_attention_frequency-th layer (from layer 0), the query feed-forward (GELU)
//   language_projection  the queries to the LM's width
//   language model  the projected queries first, then the caption: Opt reads [queries; caption] as one causal
//                 sequence, T5's encoder does (its decoder the labels)
// and the loss Blip2ForConditionalGeneration computes for pixel_values, input_ids = num_query_tokens image tokens
// then the caption, and labels: the batch's labels when it has them (aligned with the last positions, as
// transformers aligns them), else labels=input_ids, which is the labs' training step (the image tokens are then
// targets too, as there). No dropout.
//
// Shapes: pixels (B, 3, S, S) -> vision (B, N + 1, Hv), N = (S / patch)^2 -> queries (B, Q, Hq) -> projected
//         (B, Q, width) -> the LM on Q + T positions (T5: Q + T encoder positions, L decoder positions).
//
// Tensor names are the Hugging Face ones: vision_model.*, query_tokens, qformer.*, language_projection.*, and the
// LM's own behind language_model. (language_model.model.decoder.layers.0..., language_model.encoder.block.0...).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/core/param_spec.hpp"
#include "tessera/models/blip2_config.hpp"
#include "tessera/models/family_parts.hpp"
#include "tessera/models/model_family.hpp"
#include "tessera/models/opt.hpp"
#include "tessera/models/t5.hpp"

namespace tessera::models {

// What Blip2<Lm> needs to know of its language model beyond the family itself: the family's name, its presets.
template <class Lm>
struct Blip2LanguageModel {
  static_assert(sizeof(Lm) == 0, "tessera::models::Blip2<Lm>: the language model must be models::Opt or models::T5");
};
template <>
struct Blip2LanguageModel<Opt> {
  static constexpr std::string_view name = "blip2-opt";
  static std::span<const std::string_view> preset_names() { return blip2_opt_preset_names(); }
  static Blip2Config<OptConfig> preset(std::string_view n) { return blip2_opt_preset(n); }
};
template <>
struct Blip2LanguageModel<T5> {
  static constexpr std::string_view name = "blip2-t5";
  static std::span<const std::string_view> preset_names() { return blip2_t5_preset_names(); }
  static Blip2Config<T5Config> preset(std::string_view n) { return blip2_t5_preset(n); }
};

template <class Lm>
struct Blip2 {
  using family = model_family_tag;
  using Config = Blip2Config<typename Lm::Config>;
  using Batch = CaptionBatch;
  static constexpr std::string_view name = Blip2LanguageModel<Lm>::name;
  // lora_targets=auto: the language model's (PEFT's default for the LM inside; the Q-Former's query/value are not
  // named by it).
  static constexpr std::string_view lora_targets = Lm::lora_targets;

  struct Context {
    typename Lm::Context lm;  // built for seq_len + num_query_tokens positions
  };

  // Shapes: a named preset, or a Hugging Face config.json (and back).
  static Config preset(std::string_view preset_name) { return Blip2LanguageModel<Lm>::preset(preset_name); }
  static std::span<const std::string_view> preset_names() { return Blip2LanguageModel<Lm>::preset_names(); }
  static Config read_config(const std::filesystem::path& config_json) {
    return read_blip2_config<typename Lm::Config>(config_json);
  }
  static void write_config(const std::filesystem::path& config_json, const Config& config, std::string_view dtype) {
    write_blip2_config(config_json, config, dtype);
  }
  // Blip2Processor's image defaults (bicubic, CLIP's mean and std) and the LM's token ids.
  static CaptionSpec data_spec(const Config& config);

  // Units, Lv vision layers and Lq Q-Former layers, U = Lv + Lq + 5:
  //   0                 vision_model.embeddings
  //   1 .. Lv           vision_model.encoder.layers.i (Blip2EncoderLayer)
  //   Lv + 1            vision_model.post_layernorm
  //   Lv + 2            query_tokens
  //   Lv + 3            qformer.layernorm
  //   Lv + 4 .. Lv+Lq+3 qformer.encoder.layer.j (Blip2QFormerLayer)
  //   Lv + Lq + 4       language_projection
  //   U ..              the language model's units, in its order (Lm::units), under language_model.
  static std::vector<ParamSpec> parameters(const Config& config);
  static std::vector<UnitInfo> units(const Config& config);
  // Calls, in forward order: vision embeddings, layers, post_layernorm; the queries (reading qformer.layernorm and
  // query_tokens); the Q-Former layers; the projection; then the language model's calls (Lm::calls) on its units.
  static std::vector<CallInfo> calls(const Config& config);
  static Context make_context(const Config& config, std::int64_t seq_len, c10::ScalarType compute_dtype,
                              c10::Device device);

  // Calls and their inputs:
  //   vision embeddings  {pixels (B, 3, S, S)} -> (B, N + 1, Hv)
  //   vision layer       {x} -> x
  //   post_layernorm     {x} -> the image features (B, N + 1, Hv)
  //   queries            {input_ids (B, T), only for B} -> LayerNorm(query_tokens) (B, Q, Hq)
  //   Q-Former layer     {q, image features} -> q
  //   projection         {q} -> (B, Q, width)
  //   the LM's calls     as Lm::compute says for its PrefixedTokens program
  static at::Tensor compute(const Config& config, const Context& ctx, std::size_t call, const CallWeights& w,
                            std::span<const at::Tensor> inputs);
  static at::Tensor forward(const Config& config, CallRunner& run, const Batch& batch);
};

extern template struct Blip2<Opt>;
extern template struct Blip2<T5>;

using Blip2Opt = Blip2<Opt>;
using Blip2T5 = Blip2<T5>;

}  // namespace tessera::models
