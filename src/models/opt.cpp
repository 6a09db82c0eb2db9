#include "tessera/models/opt.hpp"

#include <ATen/ATen.h>

#include "tessera/models/stack_program.hpp"

#include <cmath>
#include <optional>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/ops/loss.hpp"

namespace tessera::models {
namespace {

// HF nn.LayerNorm's default epsilon; OPTConfig has no key for it.
constexpr double kLayerNormEps = 1e-5;

// A block's parameters, in spec order (Opt::parameters).
enum Block : std::size_t {
  attn_norm_w, attn_norm_b, q_w, q_b, k_w, k_b, v_w, v_b, out_w, out_b,
  mlp_norm_w, mlp_norm_b, fc1_w, fc1_b, fc2_w, fc2_b,
};

// Unit 0: embed_tokens (vocab, word), embed_positions (max_pos + 2, H), project_in (H, word) when projecting.
enum Embedding : std::size_t { embed_tokens, embed_positions, project_in };

at::Tensor layer_norm(const at::Tensor& x, const CallWeights& w, std::size_t weight, std::size_t bias) {
  return at::layer_norm(x, {x.size(-1)}, w[0][weight], w[0][bias], kLayerNormEps);
}

}  // namespace

std::vector<ParamSpec> Opt::parameters(const Config& c) {
  std::vector<ParamSpec> specs;
  const auto h = c.hidden_size, word = c.word_embed_proj_dim;
  specs.push_back({"model.decoder.embed_tokens.weight", {c.vocab_size, word}, 0, ParamInit::normal});
  specs.push_back({"model.decoder.embed_positions.weight", {c.max_position_embeddings + 2, h}, 0, ParamInit::normal});
  if (c.has_projections())
    specs.push_back({"model.decoder.project_in.weight", {h, word}, 0, ParamInit::normal, true});
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.decoder.layers." + std::to_string(i) + ".";
    const auto unit = static_cast<std::size_t>(i + 1);
    auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in) {
      specs.push_back({p + name + ".weight", {out, in}, unit, ParamInit::normal, true});
      specs.push_back({p + name + ".bias", {out}, unit, ParamInit::zeros});
    };
    auto norm = [&](const std::string& name) {
      specs.push_back({p + name + ".weight", {h}, unit, ParamInit::ones});
      specs.push_back({p + name + ".bias", {h}, unit, ParamInit::zeros});
    };
    norm("self_attn_layer_norm");
    linear("self_attn.q_proj", h, h);
    linear("self_attn.k_proj", h, h);
    linear("self_attn.v_proj", h, h);
    linear("self_attn.out_proj", h, h);
    norm("final_layer_norm");
    linear("fc1", c.ffn_dim, h);
    linear("fc2", h, c.ffn_dim);
  }
  const auto head_unit = static_cast<std::size_t>(c.num_hidden_layers + 1);
  if (c.has_final_layer_norm()) {
    specs.push_back({"model.decoder.final_layer_norm.weight", {h}, head_unit, ParamInit::ones});
    specs.push_back({"model.decoder.final_layer_norm.bias", {h}, head_unit, ParamInit::zeros});
  }
  if (c.has_projections())
    specs.push_back({"model.decoder.project_out.weight", {word, h}, head_unit, ParamInit::normal, true});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, word}, head_unit, ParamInit::normal});
  return specs;
}

std::vector<UnitInfo> Opt::units(const Config& c) {
  std::vector<UnitInfo> out{{"model.decoder.embed_tokens", "", false}};
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
    out.push_back({"model.decoder.layers." + std::to_string(i), "OPTDecoderLayer", false});
  if (c.has_head_unit())  // named after its first module
    out.push_back({c.has_final_layer_norm() ? "model.decoder.final_layer_norm"
                   : c.has_projections()    ? "model.decoder.project_out"
                                            : "lm_head",
                   "", false});
  return out;
}

std::vector<CallInfo> Opt::calls(const Config& c) {
  const auto blocks = static_cast<std::size_t>(c.num_hidden_layers);
  std::vector<CallInfo> out{{{0}}};
  for (std::size_t b = 1; b <= blocks; ++b) out.push_back({{b}});
  if (!c.has_head_unit())
    out.push_back(CallInfo{{0}});  // post-LN, no projections, tied: the head is embed_tokens alone
  else
    out.push_back(c.tie_word_embeddings ? CallInfo{{blocks + 1, 0}} : CallInfo{{blocks + 1}});
  return out;
}

Opt::Context Opt::make_context(const Config& c, std::int64_t seq_len, c10::ScalarType, c10::Device device) {
  if (seq_len > c.max_position_embeddings)
    throw ConfigError("seq_len=" + std::to_string(seq_len) + " exceeds max_position_embeddings=" +
                      std::to_string(c.max_position_embeddings) +
                      " of this OPT model, where its learned positions end; set seq_len=" +
                      std::to_string(c.max_position_embeddings) + " or less");
  // HF OPTLearnedPositionalEmbedding with an all-ones attention mask: cumsum(mask) - 1 = 0..T-1, plus 2.
  return Context{at::arange(2, seq_len + 2, at::TensorOptions().dtype(at::kLong).device(device))};
}

at::Tensor Opt::forward(const Config& c, CallRunner& run, const Batch& batch) {
  return stack_forward(run, static_cast<std::size_t>(c.num_hidden_layers), batch.inputs, batch.targets);
}

at::Tensor Opt::forward(const Config& c, CallRunner& run, const PrefixedTokens& in) {
  if (c.has_projections())
    throw ConfigError("OPT: word_embed_proj_dim=" + std::to_string(c.word_embed_proj_dim) + " differs from hidden_size=" +
                      std::to_string(c.hidden_size) + ", so embeddings pass project_in; a prefix of embeddings "
                      "(BLIP-2's queries) needs an OPT without projections (word_embed_proj_dim = hidden_size)");
  const auto b = in.input_ids.size(0), p = in.prefix.size(1), n = p + in.input_ids.size(1), l = in.labels.size(1);
  if (l > n)
    throw Error("OPT: " + std::to_string(l) + " labels per row for " + std::to_string(n) + " positions");
  const at::Tensor mask = at::cat({at::ones({b, p}, in.attention_mask.options()), in.attention_mask}, 1);
  // The labels of the last l positions, shifted within them, as Blip2ForConditionalGeneration's loss on
  // logits[:, -l:]: position n - l + j predicts label j + 1 (j < l - 1); every other position is ignored (so with
  // l < n the last prefix position predicts nothing, not label 0).
  const at::Tensor ignored = at::full({b, n - l + 1}, kIgnoreIndex, in.labels.options());
  const at::Tensor targets =
      at::cat({ignored.narrow(1, 0, n - l), in.labels.narrow(1, 1, l - 1), ignored.narrow(1, 0, 1)}, 1);
  at::Tensor x = run.call(0, {in.input_ids, mask, in.prefix});
  const auto blocks = static_cast<std::size_t>(c.num_hidden_layers);
  for (std::size_t k = 1; k <= blocks; ++k) x = run.call(k, {x, mask});
  return run.call(blocks + 1, {x, targets});
}

namespace {

// Unit 0: tokens (B, T) -> embed_tokens (B, T, word) [-> project_in (B, T, H)] + embed_positions (T, H).
at::Tensor embed(const OptConfig& c, const Opt::Context& ctx, const CallWeights& w, const at::Tensor& tokens) {
  const auto t = tokens.size(1);
  if (t > ctx.positions.size(0))
    throw Error("OPT: a batch of " + std::to_string(t) + " tokens per row, but the context was built for " +
                std::to_string(ctx.positions.size(0)) + "; build it with make_context(config, seq_len >= " +
                std::to_string(t) + ", ...)");
  // nn.Embedding(vocab, word, padding_idx=pad_token_id): the padding row gets no gradient from the lookup.
  at::Tensor x = at::embedding(w[0][embed_tokens], tokens, c.pad_token_id);
  if (c.has_projections()) x = w.linear(0, project_in, x);
  return x + at::embedding(w[0][embed_positions], ctx.positions.narrow(0, 0, t));
}

// Unit 0 behind a prefix: [prefix (B, P, H); embed_tokens(tokens) (B, T, H)] + embed_positions at
// cumsum(mask) * mask - 1 + 2 (mask (B, P + T); padding reads row 1), as OPTDecoder with inputs_embeds.
at::Tensor embed_prefixed(const OptConfig& c, const Opt::Context& ctx, const CallWeights& w, const at::Tensor& tokens,
                          const at::Tensor& mask, const at::Tensor& prefix) {
  const auto n = mask.size(1);
  if (n > ctx.positions.size(0))
    throw Error("OPT: " + std::to_string(n) + " positions per row, but the context was built for " +
                std::to_string(ctx.positions.size(0)) + "; build it with make_context(config, seq_len >= " +
                std::to_string(n) + ", ...)");
  const at::Tensor x = at::cat({prefix, at::embedding(w[0][embed_tokens], tokens, c.pad_token_id)}, 1);
  const at::Tensor positions = at::cumsum(mask, 1) * mask - 1 + 2;
  return x + at::embedding(w[0][embed_positions], positions);
}

// One OPTDecoderLayer, w = the Block parameters. (B, T, H) -> (B, T, H).
// Pre-LN:  x1 = x + attn(ln1(x));  out = x1 + mlp(ln2(x1)).
// Post-LN: x1 = ln1(x + attn(x));  out = ln2(x1 + mlp(x1)).
at::Tensor decoder_layer(const OptConfig& c, const CallWeights& w, const at::Tensor& x, const at::Tensor& mask) {
  const auto b = x.size(0), t = x.size(1), heads = c.num_attention_heads, d = c.head_dim();
  const bool pre = c.do_layer_norm_before;

  // Attention: (B, T, H) -> q, k, v (B, heads, T, D). HF scales q after its projection (bias included) and
  // calls sdpa with scale 1: the same order of rounding here.
  // Pre-LN: the norm and the three projections are one node that keeps x, not the normed copy (ops/fused.hpp).
  const std::vector<at::Tensor> qkv =
      pre ? w.layer_norm_linear(0, x, attn_norm_w, attn_norm_b, kLayerNormEps, {{q_w, q_b}, {k_w, k_b}, {v_w, v_b}})
          : std::vector<at::Tensor>{w.linear(0, q_w, x, q_b), w.linear(0, k_w, x, k_b), w.linear(0, v_w, x, v_b)};
  const double scaling = std::pow(static_cast<double>(d), -0.5);
  const at::Tensor q = (qkv[0] * scaling).view({b, t, heads, d}).transpose(1, 2);
  const at::Tensor k = qkv[1].view({b, t, heads, d}).transpose(1, 2);
  const at::Tensor v = qkv[2].view({b, t, heads, d}).transpose(1, 2);
  // With a padding mask (B, T): causal and not padded, (B, 1, T, T) booleans, as transformers' causal mask.
  std::optional<at::Tensor> allowed;  // none: is_causal (an undefined tensor would be taken for a mask)
  if (mask.defined())
    allowed = at::ones({t, t}, mask.options().dtype(at::kBool)).tril().unsqueeze(0).logical_and(
                  mask.to(at::kBool).unsqueeze(1)).unsqueeze(1);
  const at::Tensor attn = w.gemm.attention(q, k, v, allowed, /*causal=*/!mask.defined(), /*scale=*/1.0)
                              .transpose(1, 2)
                              .reshape({b, t, heads * d});
  at::Tensor x1 = x + w.linear(0, out_w, attn, out_b);
  if (!pre) x1 = layer_norm(x1, w, attn_norm_w, attn_norm_b);

  // MLP: fc2(relu(fc1(h))).
  const at::Tensor f = pre ? w.layer_norm_linear(0, x1, mlp_norm_w, mlp_norm_b, kLayerNormEps, {{fc1_w, fc1_b}})[0]
                           : w.linear(0, fc1_w, x1, fc1_b);
  at::Tensor out = x1 + w.linear(0, fc2_w, at::relu(f), fc2_b);
  if (!pre) out = layer_norm(out, w, mlp_norm_w, mlp_norm_b);
  return out;
}

// Head: x (B, T, H) [-> final_layer_norm] [-> project_out (B, T, word)] -> logits (B, T, V) -> mean CE in fp32.
// The call's units: {head, embedding} when tied, {head} when untied, {embedding} when there is no head unit.
at::Tensor head(const OptConfig& c, const CallWeights& w, const at::Tensor& x, const at::Tensor& targets) {
  at::Tensor h = x;
  at::Tensor lm_head;
  if (!c.has_head_unit()) {
    lm_head = w[0][embed_tokens];
  } else {
    std::size_t j = 0;  // head unit: [final_layer_norm.weight, .bias] [project_out.weight] [lm_head.weight]
    if (c.has_final_layer_norm()) {
      h = layer_norm(h, w, 0, 1);
      j = 2;
    }
    if (c.has_projections()) h = w.linear(0, j++, h);
    lm_head = c.tie_word_embeddings ? w[1][embed_tokens] : w[0][j];
  }
  return ops::linear_cross_entropy(w.gemm, h, lm_head, targets);  // logits (B, T, V), whole or in blocks
}

}  // namespace

at::Tensor Opt::compute(const Config& c, const Context& ctx, std::size_t call, const CallWeights& w,
                        std::span<const at::Tensor> in) {
  const auto blocks = static_cast<std::size_t>(c.num_hidden_layers);
  if (call == 0) return in.size() == 3 ? embed_prefixed(c, ctx, w, in[0], in[1], in[2]) : embed(c, ctx, w, in[0]);
  if (call <= blocks) return decoder_layer(c, w, in[0], in.size() > 1 ? in[1] : at::Tensor());
  return head(c, w, in[0], in[1]);
}

}  // namespace tessera::models
