#include "tessera/models/llama.hpp"

#include <ATen/ATen.h>

#include "tessera/engine/target.hpp"
#include "tessera/models/stack_program.hpp"
#include "tessera/ops/fused.hpp"
#include "tessera/ops/loss.hpp"
#include "tessera/ops/norm_linear.hpp"
#include "tessera/ops/rope.hpp"

#include <cmath>
#include <limits>
#include <string>


namespace tessera::models {
namespace {

// HF LlamaRMSNorm: normalise in fp32, cast back, then scale: weight * (x / rms(x)).to(dtype), as one node that keeps
// x and the fp32 1/rms per row (ops/fused.hpp). On CUDA, LibTorch's fused kernel does the first part in one pass
// (fp32 inside, one rounding to x's dtype, as HF's cast) and its backward in another. The weight stays outside the
// kernel, so the rounding is HF's on both devices.
bool fused_norm(const at::Tensor& x) { return kernel_target(x) == c10::DeviceType::CUDA; }
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return ops::rms_norm(x, weight, eps, ops::RmsForm::llama, fused_norm(x));
}

// The linear layers `layers` of the call's unit on rms_norm(x, its parameter `norm`): one node that keeps x and the
// fp32 1/rms, not the normalized copy (ops::rms_norm_linear); op by op where an adapter sees the linear layers.
std::vector<at::Tensor> norm_linear(const LlamaConfig& c, const CallWeights& w, const at::Tensor& x, std::size_t norm,
                                    std::initializer_list<std::size_t> layers) {
  std::vector<at::Tensor> out;
  if (w.adapter) {
    const at::Tensor h = rms_norm(x, w[0][norm], c.rms_norm_eps);
    for (const std::size_t j : layers) out.push_back(w.linear(0, j, h));
    return out;
  }
  std::vector<at::Tensor> weights;
  for (const std::size_t j : layers) weights.push_back(w[0][j]);
  return ops::rms_norm_linear(w.gemm, x, w[0][norm], c.rms_norm_eps, ops::RmsForm::llama, fused_norm(x), weights);
}

}  // namespace

std::vector<ParamSpec> Llama::parameters(const Config& c) {
  std::vector<ParamSpec> specs;
  const auto h = c.hidden_size, q_out = c.num_attention_heads * c.head_dim, kv_out = c.num_key_value_heads * c.head_dim;
  specs.push_back({"model.embed_tokens.weight", {c.vocab_size, h}, 0, ParamInit::normal});
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const auto unit = static_cast<std::size_t>(i + 1);
    specs.push_back({p + "input_layernorm.weight", {h}, unit, ParamInit::ones});
    specs.push_back({p + "self_attn.q_proj.weight", {q_out, h}, unit, ParamInit::normal, true});
    specs.push_back({p + "self_attn.k_proj.weight", {kv_out, h}, unit, ParamInit::normal, true});
    specs.push_back({p + "self_attn.v_proj.weight", {kv_out, h}, unit, ParamInit::normal, true});
    specs.push_back({p + "self_attn.o_proj.weight", {h, q_out}, unit, ParamInit::normal, true});
    specs.push_back({p + "post_attention_layernorm.weight", {h}, unit, ParamInit::ones});
    specs.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, h}, unit, ParamInit::normal, true});
    specs.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, h}, unit, ParamInit::normal, true});
    specs.push_back({p + "mlp.down_proj.weight", {h, c.intermediate_size}, unit, ParamInit::normal, true});
  }
  const auto head_unit = static_cast<std::size_t>(c.num_hidden_layers + 1);
  specs.push_back({"model.norm.weight", {h}, head_unit, ParamInit::ones});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, h}, head_unit, ParamInit::normal});
  return specs;
}

Llama::Context Llama::make_context(const Config& c, std::int64_t seq_len, c10::ScalarType compute_dtype,
                                   c10::Device device) {
  // HF LlamaRotaryEmbedding, in fp32 as there: inv_freq = 1 / theta^(2i/D); angle(t, i) = t * inv_freq[i];
  // emb = cat(angle, angle).
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor exponents = at::arange(0, c.head_dim, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) /
                               static_cast<double>(c.head_dim);
  const at::Tensor inv_freq = 1.0 / at::pow(c.rope_theta, exponents);  // (D/2,)
  const at::Tensor positions = at::arange(seq_len, f32);
  const at::Tensor angles = at::outer(positions, inv_freq);  // (T, D/2)
  const at::Tensor emb = at::cat({angles, angles}, -1);          // (T, D)
  Context ctx;
  ctx.cos = emb.cos().to(device, compute_dtype);
  ctx.sin = emb.sin().to(device, compute_dtype);
  return ctx;
}

std::vector<UnitInfo> Llama::units(const Config& c) {
  std::vector<UnitInfo> out{{"model.embed_tokens", "", false}};
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
    out.push_back({"model.layers." + std::to_string(i), "LlamaDecoderLayer", false});
  out.push_back({"model.norm", "", false});
  return out;
}

std::vector<CallInfo> Llama::calls(const Config& c) {
  const auto blocks = static_cast<std::size_t>(c.num_hidden_layers);
  std::vector<CallInfo> out{{{0}}};
  for (std::size_t b = 1; b <= blocks; ++b) out.push_back({{b}});
  out.push_back(c.tie_word_embeddings ? CallInfo{{blocks + 1, 0}} : CallInfo{{blocks + 1}});
  return out;
}

at::Tensor Llama::forward(const Config& c, CallRunner& run, const Batch& batch) {
  return stack_forward(run, static_cast<std::size_t>(c.num_hidden_layers), batch.inputs, batch.targets);
}

namespace {

// One LlamaDecoderLayer: w = {input_layernorm, q, k, v, o, post_attention_layernorm, gate, up, down}.
// (B, T, H) -> (B, T, H)
at::Tensor decoder_layer(const LlamaConfig& c, const Llama::Context& ctx, const CallWeights& w, const at::Tensor& x) {
  const auto b = x.size(0), t = x.size(1);
  const auto heads = c.num_attention_heads, kv_heads = c.num_key_value_heads, d = c.head_dim;
  const at::Tensor cos = ctx.cos.narrow(0, 0, t), sin = ctx.sin.narrow(0, 0, t);

  // Attention: (B, T, H) -> q (B, heads, T, D), k/v (B, kv_heads, T, D).
  const std::vector<at::Tensor> qkv = norm_linear(c, w, x, 0, {1, 2, 3});
  at::Tensor q = qkv[0].view({b, t, heads, d}).transpose(1, 2);
  at::Tensor k = qkv[1].view({b, t, kv_heads, d}).transpose(1, 2);
  const at::Tensor v = qkv[2].view({b, t, kv_heads, d}).transpose(1, 2);
  q = ops::rope(q, cos, sin);  // on CUDA one kernel each way (ops/rope.hpp)
  k = ops::rope(k, cos, sin);
  // HF's default "sdpa" attention: causal, scaled by 1/sqrt(D), grouped-query heads shared by enable_gqa
  // (each kv head serves heads / kv_heads query heads, as repeat_kv does). (B, heads, T, D) -> (B, T, heads*D).
  const at::Tensor attn = w.gemm.attention(q, k, v, /*mask=*/std::nullopt, /*causal=*/true, /*scale=*/std::nullopt,
                                           /*gqa=*/true)
                              .transpose(1, 2)
                              .reshape({b, t, heads * d});
  const at::Tensor x1 = x + w.linear(0, 4, attn);

  // SwiGLU MLP: down(silu(gate(h)) * up(h)), one node that keeps gate(h) and up(h) only (ops::gated_linear; the gate
  // alone where an adapter sees down).
  const std::vector<at::Tensor> gate_up = norm_linear(c, w, x1, 5, {6, 7});
  const at::Tensor mlp =
      w.adapter ? w.linear(0, 8, ops::gated(gate_up[0], gate_up[1], ops::GateAct::silu))
                : ops::gated_linear(w.gemm, gate_up[0], gate_up[1], w[0][8], ops::GateAct::silu);
  return x1 + mlp;
}

}  // namespace

at::Tensor Llama::compute(const Config& c, const Context& ctx, std::size_t call, const CallWeights& w,
                          std::span<const at::Tensor> in) {
  const auto blocks = static_cast<std::size_t>(c.num_hidden_layers);
  if (call == 0) return at::embedding(w[0][0], in[0]);
  if (call <= blocks) return decoder_layer(c, ctx, w, in[0]);
  // Head: head unit = {norm[, lm_head]}, then the embedding unit (lm_head when tied).
  const at::Tensor h = rms_norm(in[0], w[0][0], c.rms_norm_eps);
  const at::Tensor& lm_head = c.tie_word_embeddings ? w[1][0] : w[0][1];
  return ops::linear_cross_entropy(w.gemm, h, lm_head, in[1]);  // logits (B, T, V), whole or in blocks
}

}  // namespace tessera::models
