#include "tessera/models/vit.hpp"

#include <ATen/ATen.h>

#include <string>

#include "tessera/core/error.hpp"
#include "tessera/models/stack_program.hpp"

namespace tessera::models {
namespace {

// Unit 0's parameters, in spec order (Vit::parameters).
enum Embeddings : std::size_t { cls_token, position_embeddings, patch_w, patch_b };

// A block's parameters, in spec order: the order of the tensors in a saved ViTForImageClassification.
enum Block : std::size_t {
  q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, fc1_w, fc1_b, fc2_w, fc2_b, before_w, before_b, after_w, after_b,
};

// The head unit: vit.layernorm, classifier.
enum Head : std::size_t { norm_w, norm_b, classifier_w, classifier_b };

at::Tensor layer_norm(const VitConfig& c, const at::Tensor& x, const CallWeights& w, std::size_t weight,
                      std::size_t bias) {
  return at::layer_norm(x, {x.size(-1)}, w[0][weight], w[0][bias], c.layer_norm_eps);
}

// Unit 0: pixels (B, C, S, S) -> patch convolution (B, H, S/P, S/P) -> (B, N, H); CLS first; + positions.
at::Tensor embed(const VitConfig& c, const CallWeights& w, const at::Tensor& pixels) {
  if (pixels.dim() != 4 || pixels.size(1) != c.num_channels || pixels.size(2) != c.image_size ||
      pixels.size(3) != c.image_size)
    throw Error("ViT: images of shape " + c10::str(pixels.sizes()) +
                " but the model takes (B, " + std::to_string(c.num_channels) + ", " + std::to_string(c.image_size) +
                ", " + std::to_string(c.image_size) + "); resize them to image_size");
  const at::Tensor& weight = w[0][patch_w];
  const at::Tensor patches = w.gemm.conv2d(pixels.to(weight.scalar_type()), weight, w[0][patch_b], c.patch_size)
                                 .flatten(2)
                                 .transpose(1, 2);
  const at::Tensor cls = w[0][cls_token].expand({pixels.size(0), -1, -1});
  return at::cat({cls, patches}, 1) + w[0][position_embeddings];
}

// One ViTLayer. (B, T, H) -> (B, T, H): x1 = x + o(attn(ln_before(x))); out = x1 + fc2(gelu(fc1(ln_after(x1)))),
// each norm with the linear layers it feeds and the GELU with fc2 one node (ops/fused.hpp).
at::Tensor layer(const VitConfig& c, const CallWeights& w, const at::Tensor& x) {
  const auto b = x.size(0), t = x.size(1), heads = c.num_attention_heads, d = c.head_dim();
  const auto qkv =
      w.layer_norm_linear(0, x, before_w, before_b, c.layer_norm_eps, {{q_w, q_b}, {k_w, k_b}, {v_w, v_b}});
  const auto split = [&](const at::Tensor& y) { return y.view({b, t, heads, d}).transpose(1, 2); };
  const at::Tensor attn =
      w.gemm.attention(split(qkv[0]), split(qkv[1]), split(qkv[2])).transpose(1, 2).reshape({b, t, heads * d});
  const at::Tensor x1 = x + w.linear(0, o_w, attn, o_b);
  const at::Tensor f = w.layer_norm_linear(0, x1, after_w, after_b, c.layer_norm_eps, {{fc1_w, fc1_b}})[0];
  return x1 + w.gelu_linear(0, fc2_w, f, fc2_b);
}

// Head: x (B, T, H) -> vit.layernorm -> CLS (B, H) -> classifier (B, num_labels) -> mean CE in fp32.
at::Tensor head(const VitConfig& c, const CallWeights& w, const at::Tensor& x, const at::Tensor& labels) {
  const at::Tensor cls = layer_norm(c, x, w, norm_w, norm_b).select(1, 0);
  const at::Tensor logits = w.linear(0, classifier_w, cls, classifier_b);
  return at::cross_entropy_loss(logits.to(at::kFloat), labels.reshape({-1}));
}

}  // namespace

ImageSpec Vit::data_spec(const Config& c) {
  ImageSpec spec;
  spec.channels = c.num_channels;
  spec.image_size = c.image_size;
  spec.num_labels = c.num_labels;
  spec.positions = c.seq_len();
  return spec;  // mean, std 0.5 and bilinear: ImageSpec's defaults are ViTImageProcessor's
}

std::vector<ParamSpec> Vit::parameters(const Config& c) {
  const auto h = c.hidden_size;
  std::vector<ParamSpec> specs{
      {"vit.embeddings.cls_token", {1, 1, h}, 0, ParamInit::normal},
      {"vit.embeddings.position_embeddings", {1, c.seq_len(), h}, 0, ParamInit::normal},
      {"vit.embeddings.patch_embeddings.projection.weight", {h, c.num_channels, c.patch_size, c.patch_size}, 0,
       ParamInit::normal},
      {"vit.embeddings.patch_embeddings.projection.bias", {h}, 0, ParamInit::zeros},
  };
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "vit.encoder.layer." + std::to_string(i) + ".";
    const auto unit = static_cast<std::size_t>(i + 1);
    auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in) {
      specs.push_back({p + name + ".weight", {out, in}, unit, ParamInit::normal, true});
      specs.push_back({p + name + ".bias", {out}, unit, ParamInit::zeros});
    };
    linear("attention.attention.query", h, h);
    linear("attention.attention.key", h, h);
    linear("attention.attention.value", h, h);
    linear("attention.output.dense", h, h);
    linear("intermediate.dense", c.intermediate_size, h);
    linear("output.dense", h, c.intermediate_size);
    for (const char* norm : {"layernorm_before", "layernorm_after"}) {
      specs.push_back({p + norm + ".weight", {h}, unit, ParamInit::ones});
      specs.push_back({p + norm + ".bias", {h}, unit, ParamInit::zeros});
    }
  }
  const auto head_unit = static_cast<std::size_t>(c.num_hidden_layers + 1);
  specs.push_back({"vit.layernorm.weight", {h}, head_unit, ParamInit::ones});
  specs.push_back({"vit.layernorm.bias", {h}, head_unit, ParamInit::zeros});
  specs.push_back({"classifier.weight", {c.num_labels, h}, head_unit, ParamInit::normal, true});
  specs.push_back({"classifier.bias", {c.num_labels}, head_unit, ParamInit::zeros});
  return specs;
}

std::vector<UnitInfo> Vit::units(const Config& c) {
  std::vector<UnitInfo> out{{"vit.embeddings", "", false}};
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
    out.push_back({"vit.encoder.layer." + std::to_string(i), "ViTLayer", false});
  out.push_back({"vit.layernorm", "", false});  // named after its first module; the classifier follows
  return out;
}

std::vector<CallInfo> Vit::calls(const Config& c) {
  const auto blocks = static_cast<std::size_t>(c.num_hidden_layers);
  std::vector<CallInfo> out;
  for (std::size_t u = 0; u <= blocks + 1; ++u) out.push_back({{u}});
  return out;
}

Vit::Context Vit::make_context(const Config&, std::int64_t, c10::ScalarType, c10::Device) { return {}; }

at::Tensor Vit::forward(const Config& c, CallRunner& run, const Batch& batch) {
  return stack_forward(run, static_cast<std::size_t>(c.num_hidden_layers), batch.pixels, batch.labels);
}

at::Tensor Vit::compute(const Config& c, const Context&, std::size_t call, const CallWeights& w,
                        std::span<const at::Tensor> in) {
  const auto blocks = static_cast<std::size_t>(c.num_hidden_layers);
  if (call == 0) return embed(c, w, in[0]);
  if (call <= blocks) return layer(c, w, in[0]);
  return head(c, w, in[0], in[1]);
}

}  // namespace tessera::models
