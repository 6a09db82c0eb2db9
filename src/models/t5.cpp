#include "tessera/models/t5.hpp"

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <limits>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/ops/fused.hpp"
#include "tessera/ops/norm_linear.hpp"
#include "tessera/ops/loss.hpp"

namespace tessera::models {
namespace {

// Where the units and calls of a config are (T5::units, T5::calls).
struct Layout {
  std::size_t e, d;  // encoder and decoder blocks
  explicit Layout(const T5Config& c)
      : e(static_cast<std::size_t>(c.num_layers)), d(static_cast<std::size_t>(c.num_decoder_layers)) {}
  // Units.
  static constexpr std::size_t shared = 0, encoder_table = 1;
  std::size_t encoder_block(std::size_t i) const { return 2 + i; }
  std::size_t encoder_norm() const { return e + 2; }
  std::size_t decoder_table() const { return e + 3; }
  std::size_t decoder_block(std::size_t j) const { return e + 4 + j; }
  std::size_t head() const { return e + d + 4; }
  // Calls (see T5::calls): the encoder's calls are their units' numbers, the decoder's one later.
  std::size_t decoder_embed_call() const { return e + 3; }
  std::size_t decoder_bias_call() const { return e + 4; }
  std::size_t decoder_block_call(std::size_t j) const { return e + 5 + j; }
  std::size_t head_call() const { return e + d + 5; }
};

// A block's parameters, in spec order. Encoder: self-attention q, k, v, o, its norm, then the feed-forward.
// Decoder: the same self-attention, then cross-attention q, k, v, o and its norm, then the feed-forward.
// Feed-forward: wi_0, wi_1, wo, norm (gated) or wi, wo, norm.
enum Attention : std::size_t { q_w, k_w, v_w, o_w, attention_norm };
constexpr std::size_t kEncoderFeedForward = 5, kCrossAttention = 5, kDecoderFeedForward = 10;

// The most negative finite value of `dtype`: what transformers adds to the scores of keys a query must not see.
double lowest(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf: return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
    case at::kBFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
    case at::kDouble: return std::numeric_limits<double>::lowest();
    default: return static_cast<double>(std::numeric_limits<float>::lowest());
  }
}

// T5LayerNorm: x / sqrt(mean(x^2) + eps), the mean in fp32, back to the weight's dtype when it is 16-bit, times it;
// one node that keeps x and the fp32 1/rms per row (ops/fused.hpp).
at::Tensor rms_norm(const T5Config& c, const at::Tensor& x, const at::Tensor& weight) {
  return ops::rms_norm(x, weight, c.layer_norm_epsilon, ops::RmsForm::t5);
}

// The linear layers `layers` of the call's unit on rms_norm(x, its parameter `norm`): one node that keeps x and the
// fp32 1/rms, not the normalized copy (ops::rms_norm_linear); op by op where an adapter sees the linear layers.
std::vector<at::Tensor> norm_linear(const T5Config& c, const CallWeights& w, const at::Tensor& x, std::size_t norm,
                                    std::initializer_list<std::size_t> layers) {
  std::vector<at::Tensor> out;
  if (w.adapter) {
    const at::Tensor h = rms_norm(c, x, w[0][norm]);
    for (const std::size_t j : layers) out.push_back(w.linear(0, j, h));
    return out;
  }
  std::vector<at::Tensor> weights;
  for (const std::size_t j : layers) weights.push_back(w[0][j]);
  return ops::rms_norm_linear(w.gemm, x, w[0][norm], c.layer_norm_epsilon, ops::RmsForm::t5, /*fused=*/false, weights);
}

// transformers clamps fp16 hidden states after each sub-layer, a little below the largest finite value when any
// of them overflowed.
at::Tensor clamp_fp16(const at::Tensor& x) {
  if (x.scalar_type() != at::kHalf) return x;
  const double max = static_cast<double>(std::numeric_limits<c10::Half>::max());
  const at::Tensor limit = at::where(at::isinf(x).any(), at::scalar_tensor(max - 1000.0, x.options()),
                                     at::scalar_tensor(max, x.options()));
  return at::clamp(x, -limit, limit);
}

// The additive mask of padded keys: (B, 1, 1, S), 0 where attention_mask is 1, the dtype's lowest where it is 0.
at::Tensor padding_bias(const at::Tensor& attention_mask, c10::ScalarType dtype) {
  const auto b = attention_mask.size(0), s = attention_mask.size(1);
  return (1.0 - attention_mask.to(dtype)).mul(lowest(dtype)).view({b, 1, 1, s});
}

// T5Attention without a cache on its projections q (B, Tq, inner), k and v (B, Tk, inner): scores q k^T (no scaling)
// plus bias, softmax in the compute dtype, o. w's parameter first + 3 is o. -> (B, Tq, d_model).
at::Tensor attend(const T5Config& c, const CallWeights& w, std::size_t first, const at::Tensor& q_in,
                  const at::Tensor& k_in, const at::Tensor& v_in, const at::Tensor& bias) {
  const auto b = q_in.size(0), tq = q_in.size(1), tk = k_in.size(1), heads = c.num_heads, d = c.d_kv;
  const at::Tensor q = q_in.view({b, tq, heads, d}).transpose(1, 2);
  const at::Tensor k = k_in.view({b, tk, heads, d}).transpose(1, 2);
  const at::Tensor v = v_in.view({b, tk, heads, d}).transpose(1, 2);
  const at::Tensor probs = at::softmax(w.gemm.matmul(q, k.transpose(2, 3)) + bias, -1);
  const at::Tensor out = w.gemm.matmul(probs, v).transpose(1, 2).reshape({b, tq, heads * d});
  return w.linear(0, first + o_w, out);
}

// The self-attention sub-layer's attention on rms_norm(x): q, k, v from one node (norm_linear).
at::Tensor self_attention(const T5Config& c, const CallWeights& w, std::size_t first, const at::Tensor& x,
                          const at::Tensor& bias) {
  const std::vector<at::Tensor> qkv =
      norm_linear(c, w, x, first + attention_norm, {first + q_w, first + k_w, first + v_w});
  return attend(c, w, first, qkv[0], qkv[1], qkv[2], bias);
}

// T5LayerFF: its norm, then DenseReluDense: wo(gelu_new(wi_0 h) * wi_1 h) (one node that keeps wi_0 h and wi_1 h
// only, ops::gated_linear; the gate alone where an adapter sees wo), or wo(relu(wi h)). The norm is the parameter
// after the layer's linear weights.
at::Tensor feed_forward(const T5Config& c, const CallWeights& w, std::size_t first, const at::Tensor& x) {
  if (c.gated_gelu) {
    const std::vector<at::Tensor> gate_up = norm_linear(c, w, x, first + 3, {first, first + 1});
    if (w.adapter) return w.linear(0, first + 2, ops::gated(gate_up[0], gate_up[1], ops::GateAct::gelu_tanh));
    return ops::gated_linear(w.gemm, gate_up[0], gate_up[1], w[0][first + 2], ops::GateAct::gelu_tanh);
  }
  return w.linear(0, first + 1, at::relu(norm_linear(c, w, x, first + 2, {first})[0]));
}

// A stack's bias call: the table's values for the buckets of a q x k matrix, (1, heads, q, k).
at::Tensor table_bias(const at::Tensor& table, const at::Tensor& buckets, std::int64_t q, std::int64_t k) {
  if (q > buckets.size(0) || k > buckets.size(1))
    throw Error("T5: a batch of " + std::to_string(std::max(q, k)) + " tokens per row, but the context was built for " +
                std::to_string(buckets.size(0)) + "; build it with make_context(config, seq_len >= " +
                std::to_string(std::max(q, k)) + ", ...)");
  return at::embedding(table, buckets.narrow(0, 0, q).narrow(1, 0, k)).permute({2, 0, 1}).unsqueeze(0);
}

at::Tensor encoder_block(const T5Config& c, const CallWeights& w, const at::Tensor& x, const at::Tensor& bias) {
  const at::Tensor x1 = clamp_fp16(x + self_attention(c, w, 0, x, bias));
  return clamp_fp16(x1 + feed_forward(c, w, kEncoderFeedForward, x1));
}

at::Tensor decoder_block(const T5Config& c, const CallWeights& w, const at::Tensor& y, const at::Tensor& bias,
                         const at::Tensor& encoder_out, const at::Tensor& attention_mask) {
  const at::Tensor y1 = clamp_fp16(y + self_attention(c, w, 0, y, bias));
  // Cross-attention: q from the normed y1 (one node), k and v from the encoder's output.
  const std::size_t x0 = kCrossAttention;
  const at::Tensor q = norm_linear(c, w, y1, x0 + attention_norm, {x0 + q_w})[0];
  const at::Tensor k = w.linear(0, x0 + k_w, encoder_out), v = w.linear(0, x0 + v_w, encoder_out);
  const at::Tensor cross = padding_bias(attention_mask, q.scalar_type());
  const at::Tensor y2 = clamp_fp16(y1 + attend(c, w, x0, q, k, v, cross));
  return clamp_fp16(y2 + feed_forward(c, w, kDecoderFeedForward, y2));
}

// Head: decoder.final_layer_norm [* d_model^-0.5] -> lm_head (its own, or shared: the call's second unit) -> mean
// cross-entropy in fp32 over the labels that are not -100.
at::Tensor head(const T5Config& c, const CallWeights& w, const at::Tensor& y, const at::Tensor& labels) {
  at::Tensor h = rms_norm(c, y, w[0][0]);
  if (c.scale_decoder_outputs) h = h * std::pow(static_cast<double>(c.d_model), -0.5);
  const at::Tensor& lm_head = c.tie_word_embeddings ? w[1][0] : w[0][1];
  return ops::linear_cross_entropy(w.gemm, h, lm_head, labels, kIgnoreIndex);  // whole or in blocks
}

}  // namespace

std::vector<ParamSpec> T5::parameters(const Config& c) {
  const Layout at_(c);
  const auto dm = c.d_model, inner = c.inner_dim();
  const double f = c.initializer_range;
  auto sd = [&](std::int64_t n) { return f * std::pow(static_cast<double>(n), -0.5); };  // T5's init scales
  std::vector<ParamSpec> specs;
  auto normal = [&](std::string name, std::vector<std::int64_t> shape, std::size_t unit, double std, bool linear) {
    ParamSpec s{std::move(name), std::move(shape), unit, ParamInit::normal, linear};
    s.init_std = std;
    specs.push_back(std::move(s));
  };
  auto norm = [&](const std::string& name, std::size_t unit) {
    specs.push_back({name + ".weight", {dm}, unit, ParamInit::ones});
  };
  auto attention_specs = [&](const std::string& p, std::size_t unit) {  // p: "...SelfAttention." / "EncDecAttention."
    normal(p + "q.weight", {inner, dm}, unit, f * std::pow(static_cast<double>(dm * c.d_kv), -0.5), true);
    normal(p + "k.weight", {inner, dm}, unit, sd(dm), true);
    normal(p + "v.weight", {inner, dm}, unit, sd(dm), true);
    normal(p + "o.weight", {dm, inner}, unit, sd(inner), true);
  };
  auto feed_forward_specs = [&](const std::string& p, std::size_t unit) {  // p: "...DenseReluDense."
    if (c.gated_gelu) {
      normal(p + "wi_0.weight", {c.d_ff, dm}, unit, sd(dm), true);
      normal(p + "wi_1.weight", {c.d_ff, dm}, unit, sd(dm), true);
    } else {
      normal(p + "wi.weight", {c.d_ff, dm}, unit, sd(dm), true);
    }
    normal(p + "wo.weight", {dm, c.d_ff}, unit, sd(c.d_ff), true);
  };
  auto table = [&](const std::string& stack, std::size_t unit) {
    normal(stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight",
           {c.relative_attention_num_buckets, c.num_heads}, unit, sd(dm), false);
  };

  normal("shared.weight", {c.vocab_size, dm}, Layout::shared, f, false);
  specs.back().aliases = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"};  // tied copies
  table("encoder", Layout::encoder_table);
  for (std::size_t i = 0; i < at_.e; ++i) {
    const std::string p = "encoder.block." + std::to_string(i) + ".layer.";
    const std::size_t unit = at_.encoder_block(i);
    attention_specs(p + "0.SelfAttention.", unit);
    norm(p + "0.layer_norm", unit);
    feed_forward_specs(p + "1.DenseReluDense.", unit);
    norm(p + "1.layer_norm", unit);
  }
  norm("encoder.final_layer_norm", at_.encoder_norm());
  table("decoder", at_.decoder_table());
  for (std::size_t j = 0; j < at_.d; ++j) {
    const std::string p = "decoder.block." + std::to_string(j) + ".layer.";
    const std::size_t unit = at_.decoder_block(j);
    attention_specs(p + "0.SelfAttention.", unit);
    norm(p + "0.layer_norm", unit);
    attention_specs(p + "1.EncDecAttention.", unit);
    norm(p + "1.layer_norm", unit);
    feed_forward_specs(p + "2.DenseReluDense.", unit);
    norm(p + "2.layer_norm", unit);
  }
  norm("decoder.final_layer_norm", at_.head());
  if (!c.tie_word_embeddings) normal("lm_head.weight", {c.vocab_size, dm}, at_.head(), f, false);
  return specs;
}

std::vector<UnitInfo> T5::units(const Config& c) {
  const Layout at_(c);
  std::vector<UnitInfo> out{{"shared", "", false},
                            {"encoder.block.0.layer.0.SelfAttention.relative_attention_bias", "", false}};
  for (std::size_t i = 0; i < at_.e; ++i) out.push_back({"encoder.block." + std::to_string(i), "T5Block", false});
  out.push_back({"encoder.final_layer_norm", "", false});
  out.push_back({"decoder.block.0.layer.0.SelfAttention.relative_attention_bias", "", false});
  for (std::size_t j = 0; j < at_.d; ++j) out.push_back({"decoder.block." + std::to_string(j), "T5Block", false});
  out.push_back({"decoder.final_layer_norm", "", false});  // named after its first module; an untied lm_head follows
  return out;
}

std::vector<CallInfo> T5::calls(const Config& c) {
  const Layout at_(c);
  std::vector<CallInfo> out;
  for (std::size_t u = 0; u <= at_.encoder_norm(); ++u) out.push_back({{u}});  // embedding, bias, blocks, norm
  out.push_back({{Layout::shared}});                                           // the decoder's embedding
  for (std::size_t u = at_.decoder_table(); u < at_.head(); ++u) out.push_back({{u}});
  out.push_back(c.tie_word_embeddings ? CallInfo{{at_.head(), Layout::shared}} : CallInfo{{at_.head()}});
  return out;
}

at::Tensor T5::position_buckets(const Config& c, std::int64_t q_len, std::int64_t k_len, bool bidirectional,
                                c10::Device device) {
  const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  at::Tensor relative = at::arange(k_len, opts).unsqueeze(0) - at::arange(q_len, opts).unsqueeze(1);  // key - query
  std::int64_t buckets = c.relative_attention_num_buckets;
  at::Tensor out = at::zeros({q_len, k_len}, opts);
  if (bidirectional) {
    buckets /= 2;
    out = out + relative.gt(0).to(at::kLong) * buckets;
    relative = relative.abs();
  } else {
    relative = -at::clamp_max(relative, 0);
  }
  // Half of the buckets are exact distances; the rest log-spaced up to max_distance (computed in fp32 as there).
  const std::int64_t max_exact = buckets / 2;
  const at::Tensor small = relative.lt(max_exact);
  at::Tensor large = max_exact + (at::log(relative.to(at::kFloat) / static_cast<double>(max_exact)) /
                                  std::log(static_cast<double>(c.relative_attention_max_distance) /
                                           static_cast<double>(max_exact)) *
                                  static_cast<double>(buckets - max_exact))
                                     .to(at::kLong);
  large = at::clamp_max(large, buckets - 1);
  return out + at::where(small, relative, large);
}

T5::Context T5::make_context(const Config& c, std::int64_t seq_len, c10::ScalarType, c10::Device device) {
  return Context{position_buckets(c, seq_len, seq_len, true, device),
                 position_buckets(c, seq_len, seq_len, false, device)};
}

at::Tensor T5::shift_right(const Config& c, const at::Tensor& labels) {
  const at::Tensor start = at::full({labels.size(0), 1}, c.decoder_start_token_id, labels.options());
  const at::Tensor shifted = at::cat({start, labels.narrow(1, 0, labels.size(1) - 1)}, 1);
  return shifted.masked_fill(shifted.eq(kIgnoreIndex), c.pad_token_id);
}

namespace {

// The program once the encoder's first call is made: x its output (B, S, d_model), mask (B, S) the encoder's.
at::Tensor encode_decode(const T5Config& c, CallRunner& run, at::Tensor x, const at::Tensor& mask,
                         const at::Tensor& labels) {
  const Layout at_(c);
  const at::Tensor encoder_bias = run.call(Layout::encoder_table, {mask});
  for (std::size_t i = 0; i < at_.e; ++i) x = run.call(at_.encoder_block(i), {x, encoder_bias});
  const at::Tensor encoder_out = run.call(at_.encoder_norm(), {x});
  x = at::Tensor();

  const at::Tensor decoder_ids = T5::shift_right(c, labels);
  at::Tensor y = run.call(at_.decoder_embed_call(), {decoder_ids});
  const at::Tensor decoder_bias = run.call(at_.decoder_bias_call(), {decoder_ids});
  for (std::size_t j = 0; j < at_.d; ++j) y = run.call(at_.decoder_block_call(j), {y, decoder_bias, encoder_out, mask});
  return run.call(at_.head_call(), {y, labels});
}

}  // namespace

at::Tensor T5::forward(const Config& c, CallRunner& run, const Batch& batch) {
  return encode_decode(c, run, run.call(0, {batch.inputs}), batch.attention_mask, batch.labels);
}

at::Tensor T5::forward(const Config& c, CallRunner& run, const PrefixedTokens& in) {
  const auto b = in.input_ids.size(0), p = in.prefix.size(1);
  const at::Tensor mask = at::cat({at::ones({b, p}, in.attention_mask.options()), in.attention_mask}, 1);
  return encode_decode(c, run, run.call(0, {in.input_ids, in.prefix}), mask, in.labels);
}

at::Tensor T5::compute(const Config& c, const Context& ctx, std::size_t call, const CallWeights& w,
                       std::span<const at::Tensor> in) {
  const Layout at_(c);
  if (call == 0 && in.size() == 2) return at::cat({in[1], at::embedding(w[0][0], in[0])}, 1);  // behind a prefix
  if (call == 0 || call == at_.decoder_embed_call()) return at::embedding(w[0][0], in[0]);
  if (call == Layout::encoder_table) {  // {attention_mask (B, S)}
    const at::Tensor& table = w[0][0];
    const auto s = in[0].size(1);
    return table_bias(table, ctx.encoder_buckets, s, s) + padding_bias(in[0], table.scalar_type());
  }
  if (call <= at_.encoder_block(at_.e - 1)) return encoder_block(c, w, in[0], in[1]);
  if (call == at_.encoder_norm()) return rms_norm(c, in[0], w[0][0]);
  if (call == at_.decoder_bias_call()) {  // {decoder ids (B, L)}: causal
    const at::Tensor& table = w[0][0];
    const auto l = in[0].size(1);
    const at::Tensor later = at::ones({l, l}, at::TensorOptions().dtype(at::kBool).device(table.device())).triu(1);
    return table_bias(table, ctx.decoder_buckets, l, l).masked_fill(later, lowest(table.scalar_type()));
  }
  if (call < at_.head_call()) return decoder_block(c, w, in[0], in[1], in[2], in[3]);
  return head(c, w, in[0], in[1]);
}

}  // namespace tessera::models
