// tests: report/mfu.hpp: the peak table by CUDA device name and compute dtype, MFU's arithmetic, the CPU's unknown
// peak, which families count their FLOPs, the formula's parts (FLOPs grow by 12*L*H*Q per token of seq_len, and by
// 6 per weight of the head). The step line's MFU: test_metrics_writer.cpp.
#include <catch2/catch.hpp>

#include "tessera/models/llama.hpp"
#include "tessera/models/opt.hpp"
#include "tessera/models/vit.hpp"
#include "tessera/report/mfu.hpp"

using namespace tessera;

TEST_CASE("peak_flops: the labs' GPUs by their CUDA names, tensor-core rate for bf16/fp16, fp32 otherwise",
          "[report][mfu]") {
  using c10::ScalarType;
  CHECK(peak_flops("NVIDIA H100 80GB HBM3", ScalarType::BFloat16) == Approx(989.4e12));
  CHECK(peak_flops("NVIDIA H100 80GB HBM3", ScalarType::Float) == Approx(66.9e12));
  CHECK(peak_flops("NVIDIA H100 PCIe", ScalarType::Half) == Approx(756.5e12));
  CHECK(peak_flops("NVIDIA H100 NVL", ScalarType::BFloat16) == Approx(835.5e12));
  CHECK(peak_flops("NVIDIA H200", ScalarType::BFloat16) == Approx(989.4e12));
  CHECK(peak_flops("NVIDIA A100-SXM4-80GB", ScalarType::BFloat16) == Approx(312e12));
  CHECK(peak_flops("NVIDIA A100 80GB PCIe", ScalarType::Float) == Approx(19.5e12));
  CHECK_FALSE(peak_flops("NVIDIA GeForce RTX 4090", ScalarType::BFloat16).has_value());
  CHECK_FALSE(device_peak_flops(c10::Device(c10::kCPU), ScalarType::Float).has_value());
}

TEST_CASE("mfu: achieved FLOP/s per device over the peak, 0 when a figure is missing", "[report][mfu]") {
  CHECK(mfu(4e15, 2.0, 4, 1e15) == Approx(0.5));
  CHECK(mfu(4e15, 2.0, 1, 0.0) == 0.0);
  CHECK(mfu(4e15, 0.0, 1, 1e15) == 0.0);
}

TEST_CASE("training FLOPs per token: Llama and OPT count them, attention grows with seq_len", "[report][mfu]") {
  static_assert(counts_training_flops<models::Llama>);
  static_assert(counts_training_flops<models::Opt>);
  static_assert(!counts_training_flops<models::Vit>);
  const auto llama = models::Llama::preset("open-llama-7b");
  const double l = static_cast<double>(llama.num_hidden_layers), c = static_cast<double>(llama.hidden_size);
  // 12 * L * H * Q more per token for each token of context (H * Q = hidden_size here).
  CHECK(llama.training_flops_per_token(2049) - llama.training_flops_per_token(2048) == Approx(12.0 * l * c));
  // The matmul part is close to 6 * (parameters - embedding): within the norms' few weights.
  const double matmul = llama.training_flops_per_token(0) / 6.0;
  const double embedding = static_cast<double>(llama.vocab_size) * c;
  CHECK(matmul == Approx(static_cast<double>(llama.parameter_count()) - embedding).epsilon(1e-4));
  // OPT ties its head to the embedding: the head's matmul is still counted once.
  const auto opt = models::Opt::preset("opt-125m");
  CHECK(opt.training_flops_per_token(0) / 6.0 > static_cast<double>(opt.vocab_size * opt.hidden_size));
}
