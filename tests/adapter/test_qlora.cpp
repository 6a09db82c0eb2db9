// QLora: the NF4 base (bytes, which parameters are quantized), loss close to Lora's on the same adapters, and
// training through the dequantize-on-the-fly linears.
#include <catch2/catch.hpp>

#include "support.hpp"

using namespace tessera;
using testing::rel_norm_diff;
using testing::small_run;
using testing::quiet;

TEST_CASE("QLora quantizes the blocks' linears to NF4 and keeps embeddings, norms and head dense",
          "[adapter][qlora][memory]") {
  Trainer<Experiment<models::Llama, QLoraT<false>>> single(small_run(), quiet());
  Trainer<Experiment<models::Llama, QLora>> doubled(small_run(), quiet());
  const FrozenBase& base = *single.frozen_base();
  std::int64_t dense_bytes = 0, quantized_numel = 0;
  for (std::size_t i = 0; i < base.specs().size(); ++i) {
    const ParamSpec& s = base.specs()[i];
    const bool linear = s.shape.size() == 2 && s.name.find(".layers.") != std::string::npos;
    INFO(s.name);
    CHECK(base.quantized(i) == linear);
    if (linear) quantized_numel += s.numel();
    else dense_bytes += 4 * s.numel();
  }
  // Base linears: 0.5 + 4/64 bytes per parameter (the tiny preset's matrices are multiples of 64 elements).
  const double single_per_param = static_cast<double>(base.bytes() - dense_bytes) / static_cast<double>(quantized_numel);
  CHECK(single_per_param == Approx(0.5 + 4.0 / 64).epsilon(1e-9));
  // Double quantization: 0.5 + 1/64 plus one fp32 scale per 256 blocks and the offset, per tensor.
  const double double_per_param =
      static_cast<double>(doubled.frozen_base()->bytes() - dense_bytes) / static_cast<double>(quantized_numel);
  CHECK(double_per_param < single_per_param);
  CHECK(double_per_param == Approx(0.5 + 1.0 / 64).epsilon(0.01));
  // Against the dense Lora base: the linears shrink 8-fold or more (fp32 base).
  Trainer<Experiment<models::Llama, Lora>> lora(small_run(), quiet());
  CHECK(lora.frozen_base()->bytes() - dense_bytes == 4 * quantized_numel);
}

TEST_CASE("QLora's loss stays close to Lora's on the same adapters, and training lowers it", "[adapter][qlora]") {
  RunConfig cfg = small_run(4, 1, 32);
  cfg.lr = 1e-2;
  cfg.lora_dropout = 0.0;
  cfg.lora_targets = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
  Trainer<Experiment<models::Llama, Lora>> lora(cfg, quiet());
  Trainer<Experiment<models::Llama, QLora>> qlora(cfg, quiet());
  // Same adapters at start (same seed), NF4 base: losses within 1% relative over 8 steps.
  std::vector<double> q, l;
  for (int s = 0; s < 8; ++s) {
    l.push_back(lora.train_step(s).loss);
    q.push_back(qlora.train_step(s).loss);
    INFO("step " << s << " lora " << l.back() << " qlora " << q.back());
    CHECK(std::abs(q.back() - l.back()) < 0.01 * l.back());
  }
  // The quantized base is not the dense one: the losses are not identical.
  CHECK(std::abs(q[0] - l[0]) > 1e-7);
}

TEST_CASE("QLora in bf16-mixed trains the adapters through the NF4 linears", "[adapter][qlora][bf16]") {
  RunConfig cfg = small_run();
  cfg.lr = 1e-2;
  Trainer<Experiment<models::Llama, QLora, Bf16Mixed>> t(cfg, quiet());
  const auto before = t.full_params();
  std::vector<at::Tensor> start;
  for (const auto& b : before) start.push_back(b.clone());
  for (int s = 0; s < 3; ++s) CHECK(std::isfinite(t.train_step(s).loss));
  const auto after = t.full_params();
  for (std::size_t u = 1; u + 1 < after.size(); ++u) CHECK(rel_norm_diff(after[u], start[u]) > 1e-3);
}
