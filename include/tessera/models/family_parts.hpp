#pragma once
// defines: the vocabulary a model family and the engine share (models/model_family.hpp says who provides what):
//   UnitInfo     one unit: the flat buffer the engine gathers, frees, reduces and updates as one tensor
//   CallInfo     one call of the forward program: which units it reads
//   CallWeights  the parameters a call sees (per unit, in spec order) and how its products are computed
//   CallRunner   what a family's forward() runs its calls through (the engine; a plain runner in tests)
//   TokenBatch   the batch of the causal language models, TokenSpec what its data checks against the model
//   ImageBatch   the batch of image classifiers, ImageSpec how its images are prepared for the model
//   Seq2SeqBatch the batch of encoder-decoder language models, Seq2SeqSpec what its data checks against the model
//   PrefixedTokens a language model's inputs behind embeddings another model made (BLIP-2's queries)
//   CaptionBatch the batch of image-to-text models (BLIP-2), CaptionSpec what its data checks against the model
#include <ATen/ATen.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/ops/fused.hpp"
#include "tessera/ops/gemm.hpp"

namespace tessera::models {

struct UnitInfo {
  std::string module;      // Hugging Face module path, e.g. "model.decoder.layers.3"
  std::string block_type;  // the repeated block's class, e.g. "OPTDecoderLayer"; empty for a unit that is not one
  bool frozen = false;     // never trained: no gradient, no optimizer state, no gradient bucket
  bool is_block() const { return !block_type.empty(); }
};

// PEFT's target_modules rule, used wherever a setting names modules: `target` names `module` when it is the
// whole path or its last dot-separated parts ("q_proj" names "model.layers.0.self_attn.q_proj").
inline bool module_matches(const std::string& module, const std::string& target) {
  return module == target ||
         (module.size() > target.size() && module.compare(module.size() - target.size(), target.size(), target) == 0 &&
          module[module.size() - target.size() - 1] == '.');
}

struct CallInfo {
  std::vector<std::size_t> units;  // the units whose parameters the call reads, its own unit first
};

// A linear layer of a call, as an adapter sees it: the k-th unit of the call, that unit's j-th parameter
// (an (out, in) weight), the input and the bias (undefined when the layer has none). Returns x W^T + b plus
// whatever the adapter adds (LoRA's path; a dequantized NF4 base).
using LinearFn =
    std::function<at::Tensor(std::size_t k, std::size_t j, const at::Tensor& x, const at::Tensor& bias)>;

struct CallWeights {
  // units[k][j]: the call's k-th unit's j-th parameter (spec shape, compute dtype). A parameter an adapter
  // quantized is an undefined tensor: reach it through linear() only.
  std::vector<std::vector<at::Tensor>> units;
  const LinearFn* adapter = nullptr;
  // How the call's matrix products run (ops/gemm.hpp): a family computes every linear layer, attention, batched
  // matmul and patch convolution through it (or through linear()), so that the run's cpu_lowp reaches them all.
  ops::Gemm gemm;

  const std::vector<at::Tensor>& operator[](std::size_t k) const { return units[k]; }
  // The k-th unit's parameter `index` as a bias; undefined for index -1 (the layer has none).
  at::Tensor bias_of(std::size_t k, std::ptrdiff_t index) const {
    return index >= 0 ? units[k][static_cast<std::size_t>(index)] : at::Tensor();
  }
  // x W^T + b for the k-th unit's weight j and (when bias >= 0) its parameter `bias` as the bias. Every linear
  // layer whose weight a family marks ParamSpec::linear must be computed through here, so adapters see it.
  at::Tensor linear(std::size_t k, std::size_t j, const at::Tensor& x, std::ptrdiff_t bias = -1) const {
    const at::Tensor b = bias_of(k, bias);
    if (adapter) return (*adapter)(k, j, x, b);
    return gemm.linear(x, units[k][j], b);
  }
  // linear(k, j_i, at::layer_norm(x, k's norm_weight and norm_bias, eps), bias_i) for each {j_i, bias_i} of
  // `layers`, as one node that keeps x and the norm's row statistics instead of the normalized copy
  // (ops::layer_norm_linear); op by op where an adapter sees the linear layers.
  struct Layer {
    std::size_t weight;
    std::ptrdiff_t bias = -1;
  };
  std::vector<at::Tensor> layer_norm_linear(std::size_t k, const at::Tensor& x, std::size_t norm_weight,
                                            std::size_t norm_bias, double eps,
                                            std::initializer_list<Layer> layers) const {
    std::vector<at::Tensor> out;
    if (adapter) {
      const at::Tensor h = at::layer_norm(x, {x.size(-1)}, units[k][norm_weight], units[k][norm_bias], eps);
      for (const Layer& l : layers) out.push_back((*adapter)(k, l.weight, h, bias_of(k, l.bias)));
      return out;
    }
    std::vector<at::Tensor> weights, biases;
    bool all_biased = true;
    for (const Layer& l : layers) {
      weights.push_back(units[k][l.weight]);
      biases.push_back(bias_of(k, l.bias));
      all_biased = all_biased && l.bias >= 0;
    }
    if (all_biased) return ops::layer_norm_linear(gemm, x, units[k][norm_weight], units[k][norm_bias], eps, weights, biases);
    // Some layers without a bias: the others' added after the node.
    out = ops::layer_norm_linear(gemm, x, units[k][norm_weight], units[k][norm_bias], eps, weights);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (biases[i].defined()) out[i] = out[i] + biases[i];
    return out;
  }
  // linear(k, j, at::gelu(x), bias) (exact GELU), as one node that keeps x instead of gelu(x) (ops::gelu_linear); op
  // by op where an adapter sees the layer.
  at::Tensor gelu_linear(std::size_t k, std::size_t j, const at::Tensor& x, std::ptrdiff_t bias = -1) const {
    if (adapter) return linear(k, j, at::gelu(x), bias);
    return ops::gelu_linear(gemm, x, units[k][j], bias_of(k, bias));
  }
};

// Runs call `call` of the program on `inputs` and returns its output. The runner gets the call's parameters,
// and back-propagates into every input that requires grad. Inputs that are not floating point (token ids,
// labels) pass through as they are.
class CallRunner {
 public:
  virtual ~CallRunner() = default;
  virtual at::Tensor call(std::size_t call, std::vector<at::Tensor> inputs) = 0;
};

// Causal language modelling: inputs and next-token targets, (B, T) int64 each, on the compute device.
struct TokenBatch {
  at::Tensor inputs;
  at::Tensor targets;
};
// What the token data must know of the model (a family's data_spec for TokenBatch): ids must be below vocab_size.
struct TokenSpec {
  std::int64_t vocab_size = 0;
};

// Image classification: pixels (B, C, S, S) fp32, already normalized as the model's image processor does, and
// class ids (B,) int64, on the compute device.
struct ImageBatch {
  at::Tensor pixels;
  at::Tensor labels;
};
// How images are resized to image_size when their size differs (the image processor's `resample`).
enum class Resample { bilinear, bicubic };
// What the image data must know of the model (a family's data_spec for ImageBatch): the image shape, the number of
// classes, and the image processor's defaults (preprocessor_config.json in model_dir overrides mean, std and
// resample, as transformers' AutoImageProcessor reads them).
struct ImageSpec {
  std::int64_t channels = 3;
  std::int64_t image_size = 224;
  std::int64_t num_labels = 0;
  std::array<double, 3> mean{0.5, 0.5, 0.5};
  std::array<double, 3> std{0.5, 0.5, 0.5};
  Resample resample = Resample::bilinear;
  std::int64_t positions = 0;  // sequence positions one image becomes (patches + CLS): the step's "tokens"
};

// Sequence-to-sequence language modelling (T5): encoder token ids padded per batch, their mask, and the decoder's
// labels, on the compute device. The family shifts the labels right to make the decoder's inputs.
struct Seq2SeqBatch {
  at::Tensor inputs;          // (B, S) int64 encoder token ids; pad_token_id after a row's end
  at::Tensor attention_mask;  // (B, S) int64: 1 for a token, 0 for padding
  at::Tensor labels;          // (B, L) int64 decoder targets; -100 (ignored by the loss) after a row's end
};
// What sequence-to-sequence data must know of the model: ids below vocab_size, and the id that pads the inputs.
struct Seq2SeqSpec {
  std::int64_t vocab_size = 0;
  std::int64_t pad_token_id = 0;
};
// A language model's inputs when a prefix of embeddings precedes the token ids' own, as a Hugging Face model gets
// them as inputs_embeds = [prefix; embed(input_ids)] (BLIP-2's projected queries). On the compute device.
struct PrefixedTokens {
  at::Tensor prefix;          // (B, P, width) in the compute dtype, always attended
  at::Tensor input_ids;       // (B, T) int64
  at::Tensor attention_mask;  // (B, T) int64 over the ids: 1 for a token, 0 for padding
  // As the model's Hugging Face class takes labels with those inputs_embeds: a causal LM's (B, L) labels of the last
  // L of the P + T positions, unshifted (L = P + T: all of them); an encoder-decoder LM's decoder labels (B, L).
  // -100 is ignored by the loss.
  at::Tensor labels;
};

// Image-to-text (BLIP-2): images and their captions, on the compute device. Captions are padded per batch.
struct CaptionBatch {
  at::Tensor pixels;          // (B, C, S, S) fp32, normalized as the model's image processor does
  at::Tensor input_ids;       // (B, T) int64 caption token ids; pad_token_id after a row's end
  at::Tensor attention_mask;  // (B, T) int64: 1 for a token, 0 for padding
  // (B, L) int64 targets, -100 ignored, when a row of the batch has labels of its own (a row without has its input
  // ids there). Undefined when none has: the model then computes the loss of labels=input_ids, as the labs pass it
  // (for BLIP-2, its Hugging Face input_ids: the query positions' image tokens, then the caption, pads included).
  at::Tensor labels;
};
// What caption data must know of the model: its images (ImageSpec), token ids below vocab_size, the pad id, and for
// the step's token count the positions the model adds to each caption (query tokens) and whether the labels are a
// second sequence (an encoder-decoder LM's decoder) or the inputs' own positions (a decoder-only LM).
struct CaptionSpec {
  ImageSpec image;
  std::int64_t vocab_size = 0;
  std::int64_t pad_token_id = 0;
  std::int64_t prefix_positions = 0;
  bool labels_are_a_sequence = false;
  // A token id captions must not hold (BLIP-2's image token, which marks the query positions); -1: none.
  std::int64_t reserved_token_id = -1;
};

// The PEFT task_type a family's batch type means (adapter_config.json): which PeftModel class loads its adapters.
// Empty (written as null) where PEFT has none, as for image classifiers.
template <class Batch>
inline constexpr std::string_view peft_task_type = "";
template <>
inline constexpr std::string_view peft_task_type<TokenBatch> = "CAUSAL_LM";
template <>
inline constexpr std::string_view peft_task_type<Seq2SeqBatch> = "SEQ_2_SEQ_LM";

// The label value the loss ignores (PyTorch's cross_entropy default, Hugging Face's label padding).
inline constexpr std::int64_t kIgnoreIndex = -100;

}  // namespace tessera::models
