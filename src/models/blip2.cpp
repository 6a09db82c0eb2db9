// implements: Blip2<Opt> and Blip2<T5> (models/blip2.hpp).
#include "tessera/models/blip2.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "tessera/core/error.hpp"

namespace tessera::models {
namespace {

// Where the units and calls of a config are (Blip2::units, Blip2::calls).
struct Layout {
  std::size_t v, q;  // vision and Q-Former layers
  template <class C>
  explicit Layout(const C& c)
      : v(static_cast<std::size_t>(c.vision.num_hidden_layers)), q(static_cast<std::size_t>(c.qformer.num_hidden_layers)) {}
  // Units.
  static constexpr std::size_t embeddings = 0;
  std::size_t post_layernorm() const { return v + 1; }
  std::size_t query_tokens() const { return v + 2; }
  std::size_t qformer_layernorm() const { return v + 3; }
  std::size_t qformer_layer(std::size_t j) const { return v + 4 + j; }
  std::size_t projection() const { return v + q + 4; }
  std::size_t first_lm_unit() const { return v + q + 5; }
  // Calls: the vision calls are their units' numbers; the queries' call reads qformer.layernorm and query_tokens,
  // so every later call is one less than its unit.
  std::size_t queries_call() const { return v + 2; }
  std::size_t qformer_call(std::size_t j) const { return v + 3 + j; }
  std::size_t projection_call() const { return v + q + 3; }
  std::size_t first_lm_call() const { return v + q + 4; }
};

// A vision layer's parameters, in spec order.
enum VisionLayer : std::size_t { ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b };
// The vision embeddings: class_embedding, patch_embedding weight and bias, position_embedding.
enum VisionEmbeddings : std::size_t { class_embedding, patch_w, patch_b, position_embedding };
// A Q-Former attention block (self or cross), from its first parameter: query, key, value (weight, bias each),
// output dense (weight, bias), output LayerNorm (weight, bias).
enum QFormerAttention : std::size_t { aq_w, aq_b, ak_w, ak_b, av_w, av_b, ao_w, ao_b, aln_w, aln_b, kAttentionParams };
// The query feed-forward after the attention blocks: intermediate_query.dense, output_query.dense, its LayerNorm.
enum QFormerFeedForward : std::size_t { fi_w, fi_b, fo_w, fo_b, fln_w, fln_b };

template <class Lm>
using LmConfigOf = typename Lm::Config;

// The LM's call runner inside Blip2's program: its calls are numbered from first_lm_call.
class OffsetRunner final : public CallRunner {
 public:
  OffsetRunner(CallRunner& inner, std::size_t offset) : inner_(inner), offset_(offset) {}
  at::Tensor call(std::size_t call, std::vector<at::Tensor> inputs) override {
    return inner_.call(call + offset_, std::move(inputs));
  }

 private:
  CallRunner& inner_;
  std::size_t offset_;
};

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return at::layer_norm(x, {x.size(-1)}, w, b, eps);
}

// (B, T, heads * d) -> (B, heads, T, d).
at::Tensor heads_first(const at::Tensor& x, std::int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, -1}).transpose(1, 2);
}
at::Tensor heads_last(const at::Tensor& x) { return x.transpose(1, 2).reshape({x.size(0), x.size(2), -1}); }

// Blip2VisionEmbeddings: conv (B, Hv, S/P, S/P) -> (B, N, Hv), the class embedding first, + positions.
at::Tensor vision_embed(const Blip2VisionConfig& c, const CallWeights& w, const at::Tensor& pixels) {
  if (pixels.dim() != 4 || pixels.size(1) != 3 || pixels.size(2) != c.image_size || pixels.size(3) != c.image_size)
    throw Error("BLIP-2: images of shape " + c10::str(pixels.sizes()) + " but the vision model takes (B, 3, " +
                std::to_string(c.image_size) + ", " + std::to_string(c.image_size) + "); resize them to image_size");
  const at::Tensor& weight = w[0][patch_w];
  const at::Tensor patches =
      w.gemm.conv2d(pixels.to(weight.scalar_type()), weight, w[0][patch_b], c.patch_size).flatten(2).transpose(1, 2);
  const at::Tensor cls = w[0][class_embedding].expand({pixels.size(0), 1, -1});
  return at::cat({cls, patches}, 1) + w[0][position_embedding];
}

// Blip2EncoderLayer: x1 = x + projection(attn(ln1(x))) with q, k, v from one qkv linear; out = x1 + mlp(ln2(x1)).
at::Tensor vision_layer(const Blip2VisionConfig& c, const CallWeights& w, const at::Tensor& x) {
  const auto heads = c.num_attention_heads;
  const std::vector<at::Tensor> qkv =
      w.layer_norm_linear(0, x, ln1_w, ln1_b, c.layer_norm_eps, {{qkv_w, qkv_b}})[0].chunk(3, -1);
  const at::Tensor attn =
      w.gemm.attention(heads_first(qkv[0], heads), heads_first(qkv[1], heads), heads_first(qkv[2], heads));
  const at::Tensor x1 = x + w.linear(0, proj_w, heads_last(attn), proj_b);
  const at::Tensor f = w.layer_norm_linear(0, x1, ln2_w, ln2_b, c.layer_norm_eps, {{fc1_w, fc1_b}})[0];
  return x1 + w.gelu_linear(0, fc2_w, f, fc2_b);
}

// Blip2QFormerAttention from parameter `first`: LayerNorm(h + dense(attn(query(h), key(kv), value(kv)))).
at::Tensor qformer_attention(const Blip2QFormerConfig& c, const CallWeights& w, std::size_t first, const at::Tensor& h,
                             const at::Tensor& kv) {
  const auto heads = c.num_attention_heads;
  const at::Tensor q = heads_first(w.linear(0, first + aq_w, h, static_cast<std::ptrdiff_t>(first + aq_b)), heads);
  const at::Tensor k = heads_first(w.linear(0, first + ak_w, kv, static_cast<std::ptrdiff_t>(first + ak_b)), heads);
  const at::Tensor v = heads_first(w.linear(0, first + av_w, kv, static_cast<std::ptrdiff_t>(first + av_b)), heads);
  const at::Tensor out = w.linear(0, first + ao_w, heads_last(w.gemm.attention(q, k, v)),
                                  static_cast<std::ptrdiff_t>(first + ao_b));
  return layer_norm(out + h, w[0][first + aln_w], w[0][first + aln_b], c.layer_norm_eps);
}

// Blip2QFormerLayer on the queries: self-attention, cross-attention to the image (when this layer has it), the
// query feed-forward LayerNorm(a + output_query(gelu(intermediate_query(a)))).
at::Tensor qformer_layer(const Blip2QFormerConfig& c, std::int64_t layer, const CallWeights& w, const at::Tensor& q,
                         const at::Tensor& image) {
  at::Tensor a = qformer_attention(c, w, 0, q, q);
  std::size_t ff = kAttentionParams;
  if (c.cross_attends(layer)) {
    a = qformer_attention(c, w, kAttentionParams, a, image.to(a.scalar_type()));
    ff += kAttentionParams;
  }
  const at::Tensor i = w.linear(0, ff + fi_w, a, static_cast<std::ptrdiff_t>(ff + fi_b));
  return layer_norm(w.gelu_linear(0, ff + fo_w, i, static_cast<std::ptrdiff_t>(ff + fo_b)) + a, w[0][ff + fln_w],
                    w[0][ff + fln_b], c.layer_norm_eps);
}

// The LM's program behind the projected queries (Opt or T5's PrefixedTokens forward), through an offset runner.
template <class Lm>
at::Tensor language_model(const Blip2Config<LmConfigOf<Lm>>& c, CallRunner& run, std::size_t first_call,
                          const at::Tensor& prefix, const CaptionBatch& batch) {
  PrefixedTokens in{prefix, batch.input_ids, batch.attention_mask, batch.labels};
  if (!batch.labels.defined()) {
    // labels=input_ids with transformers' input_ids: num_query_tokens image tokens, then the caption.
    const at::Tensor image_tokens = at::full({batch.input_ids.size(0), c.num_query_tokens}, c.image_token_index,
                                             batch.input_ids.options());
    in.labels = at::cat({image_tokens, batch.input_ids}, 1);
  }
  OffsetRunner lm(run, first_call);
  return Lm::forward(c.text, lm, in);
}

}  // namespace

template <class Lm>
CaptionSpec Blip2<Lm>::data_spec(const Config& c) {
  CaptionSpec spec;
  spec.image.channels = 3;
  spec.image.image_size = c.vision.image_size;
  spec.image.mean = {0.48145466, 0.4578275, 0.40821073};  // BlipImageProcessor's OPENAI_CLIP_MEAN / _STD
  spec.image.std = {0.26862954, 0.26130258, 0.27577711};
  spec.image.resample = Resample::bicubic;
  spec.image.positions = c.vision.positions();
  spec.vocab_size = c.text.vocab_size;
  spec.pad_token_id = c.text.pad_token_id >= 0 ? c.text.pad_token_id : 1;  // OPTConfig's default when null
  spec.prefix_positions = c.num_query_tokens;
  spec.labels_are_a_sequence = std::is_same_v<Lm, T5>;
  spec.reserved_token_id = c.image_token_index;
  return spec;
}

template <class Lm>
std::vector<ParamSpec> Blip2<Lm>::parameters(const Config& c) {
  const Layout at_(c);
  const Blip2VisionConfig& vc = c.vision;
  const Blip2QFormerConfig& qc = c.qformer;
  const auto hv = vc.hidden_size, hq = qc.hidden_size;
  std::vector<ParamSpec> specs{
      {"vision_model.embeddings.class_embedding", {1, 1, hv}, Layout::embeddings, ParamInit::normal},
      {"vision_model.embeddings.patch_embedding.weight", {hv, 3, vc.patch_size, vc.patch_size}, Layout::embeddings,
       ParamInit::normal},
      {"vision_model.embeddings.patch_embedding.bias", {hv}, Layout::embeddings, ParamInit::zeros},
      {"vision_model.embeddings.position_embedding", {1, vc.positions(), hv}, Layout::embeddings, ParamInit::normal},
  };
  auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in, std::size_t unit) {
    specs.push_back({name + ".weight", {out, in}, unit, ParamInit::normal, true});
    specs.push_back({name + ".bias", {out}, unit, ParamInit::zeros});
  };
  auto norm = [&](const std::string& name, std::int64_t width, std::size_t unit) {
    specs.push_back({name + ".weight", {width}, unit, ParamInit::ones});
    specs.push_back({name + ".bias", {width}, unit, ParamInit::zeros});
  };
  for (std::size_t i = 0; i < at_.v; ++i) {
    const std::string p = "vision_model.encoder.layers." + std::to_string(i) + ".";
    const std::size_t unit = 1 + i;
    norm(p + "layer_norm1", hv, unit);
    linear(p + "self_attn.qkv", 3 * hv, hv, unit);  // the bias's key third starts at zero (and gets no gradient)
    linear(p + "self_attn.projection", hv, hv, unit);
    norm(p + "layer_norm2", hv, unit);
    linear(p + "mlp.fc1", vc.intermediate_size, hv, unit);
    linear(p + "mlp.fc2", hv, vc.intermediate_size, unit);
  }
  norm("vision_model.post_layernorm", hv, at_.post_layernorm());
  specs.push_back({"query_tokens", {1, c.num_query_tokens, hq}, at_.query_tokens(), ParamInit::zeros});
  norm("qformer.layernorm", hq, at_.qformer_layernorm());
  auto attention = [&](const std::string& p, std::int64_t kv_width, std::size_t unit) {
    linear(p + "attention.query", hq, hq, unit);
    linear(p + "attention.key", hq, kv_width, unit);
    linear(p + "attention.value", hq, kv_width, unit);
    linear(p + "output.dense", hq, hq, unit);
    norm(p + "output.LayerNorm", hq, unit);
  };
  for (std::size_t j = 0; j < at_.q; ++j) {
    const std::string p = "qformer.encoder.layer." + std::to_string(j) + ".";
    const std::size_t unit = at_.qformer_layer(j);
    attention(p + "attention.", hq, unit);
    if (qc.cross_attends(static_cast<std::int64_t>(j))) attention(p + "crossattention.", qc.encoder_hidden_size, unit);
    linear(p + "intermediate_query.dense", qc.intermediate_size, hq, unit);
    linear(p + "output_query.dense", hq, qc.intermediate_size, unit);
    norm(p + "output_query.LayerNorm", hq, unit);
  }
  linear("language_projection", lm_width(c.text), hq, at_.projection());
  for (ParamSpec s : Lm::parameters(c.text)) {
    s.name = "language_model." + s.name;
    for (std::string& alias : s.aliases) alias = "language_model." + alias;
    s.unit += at_.first_lm_unit();
    specs.push_back(std::move(s));
  }
  return specs;
}

template <class Lm>
std::vector<UnitInfo> Blip2<Lm>::units(const Config& c) {
  const Layout at_(c);
  std::vector<UnitInfo> out{{"vision_model.embeddings", "", false}};
  for (std::size_t i = 0; i < at_.v; ++i)
    out.push_back({"vision_model.encoder.layers." + std::to_string(i), "Blip2EncoderLayer", false});
  out.push_back({"vision_model.post_layernorm", "", false});
  out.push_back({"query_tokens", "", false});
  out.push_back({"qformer.layernorm", "", false});
  for (std::size_t j = 0; j < at_.q; ++j)
    out.push_back({"qformer.encoder.layer." + std::to_string(j), "Blip2QFormerLayer", false});
  out.push_back({"language_projection", "", false});
  for (UnitInfo u : Lm::units(c.text)) {
    u.module = "language_model." + u.module;
    out.push_back(std::move(u));
  }
  return out;
}

template <class Lm>
std::vector<CallInfo> Blip2<Lm>::calls(const Config& c) {
  const Layout at_(c);
  std::vector<CallInfo> out;
  for (std::size_t u = 0; u <= at_.post_layernorm(); ++u) out.push_back({{u}});
  out.push_back({{at_.qformer_layernorm(), at_.query_tokens()}});
  for (std::size_t j = 0; j < at_.q; ++j) out.push_back({{at_.qformer_layer(j)}});
  out.push_back({{at_.projection()}});
  for (CallInfo call : Lm::calls(c.text)) {
    for (std::size_t& u : call.units) u += at_.first_lm_unit();
    out.push_back(std::move(call));
  }
  return out;
}

template <class Lm>
typename Blip2<Lm>::Context Blip2<Lm>::make_context(const Config& c, std::int64_t seq_len, c10::ScalarType dtype,
                                                    c10::Device device) {
  if constexpr (std::is_same_v<Lm, Opt>) {
    if (seq_len + c.num_query_tokens > c.text.max_position_embeddings)
      throw ConfigError("seq_len=" + std::to_string(seq_len) + ": with the " + std::to_string(c.num_query_tokens) +
                        " query positions in front, captions reach position " +
                        std::to_string(seq_len + c.num_query_tokens) + " but the OPT language model's positions end at "
                        "max_position_embeddings=" + std::to_string(c.text.max_position_embeddings) + "; set seq_len=" +
                        std::to_string(c.text.max_position_embeddings - c.num_query_tokens) + " or less");
  }
  return Context{Lm::make_context(c.text, seq_len + c.num_query_tokens, dtype, device)};
}

template <class Lm>
at::Tensor Blip2<Lm>::forward(const Config& c, CallRunner& run, const Batch& batch) {
  const Layout at_(c);
  at::Tensor x = run.call(0, {batch.pixels});
  for (std::size_t i = 1; i <= at_.v; ++i) x = run.call(i, {x});
  const at::Tensor image = run.call(at_.post_layernorm(), {x});
  x = at::Tensor();
  at::Tensor q = run.call(at_.queries_call(), {batch.input_ids});
  for (std::size_t j = 0; j < at_.q; ++j) q = run.call(at_.qformer_call(j), {q, image});
  const at::Tensor prefix = run.call(at_.projection_call(), {q});
  q = at::Tensor();
  return language_model<Lm>(c, run, at_.first_lm_call(), prefix, batch);
}

template <class Lm>
at::Tensor Blip2<Lm>::compute(const Config& c, const Context& ctx, std::size_t call, const CallWeights& w,
                              std::span<const at::Tensor> in) {
  const Layout at_(c);
  if (call >= at_.first_lm_call()) return Lm::compute(c.text, ctx.lm, call - at_.first_lm_call(), w, in);
  if (call == 0) return vision_embed(c.vision, w, in[0]);
  if (call <= at_.v) return vision_layer(c.vision, w, in[0]);
  if (call == at_.post_layernorm()) return layer_norm(in[0], w[0][0], w[0][1], c.vision.layer_norm_eps);
  if (call == at_.queries_call()) {  // units {qformer.layernorm, query_tokens}
    const at::Tensor& tokens = w[1][0];
    return layer_norm(tokens.expand({in[0].size(0), -1, -1}), w[0][0], w[0][1], c.qformer.layer_norm_eps);
  }
  if (call < at_.projection_call())
    return qformer_layer(c.qformer, static_cast<std::int64_t>(call - at_.qformer_call(0)), w, in[0], in[1]);
  return w.linear(0, 0, in[0], 1);  // language_projection
}

template struct Blip2<Opt>;
template struct Blip2<T5>;

}  // namespace tessera::models
