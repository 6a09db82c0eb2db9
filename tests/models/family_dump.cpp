// family_dump: one forward and backward of a model family on plain tensors (DirectRunner), written for
// tests/reference/check_family_forward.py to compare with Hugging Face transformers on the same weights.
//   family_dump FAMILY CONFIG.json OUT_DIR SEED [--perturb]
// FAMILY is "llama", "opt", "t5", "vit", "blip2-opt" or "blip2-t5"; CONFIG.json a Hugging Face config.json that the
// family reads.
// The weights: ParamStore::initialize(0.08, SEED) (wider than HF's 0.02, so that attention is far from
// uniform), then every norm weight set to 1 + 0.2 N(0, 1) and every bias (ParamInit::zeros) to 0.1 N(0, 1), so
// that they are tested too. Writes
//   OUT_DIR/model/              config.json and model.safetensors (write_config, ParamStore::save)
//   OUT_DIR/grads.safetensors   tokens, targets  I64 (2, 16)  drawn from SEED, token 1 (OPT's padding_idx) at
//                                                              two places (language models)
//                               pixels           F32 (2, C, S, S), labels I64 (2,): N(0, 1) pixels and class ids
//                                                              drawn from SEED (image classifiers)
//                               input_ids, attention_mask I64 (2, 16), labels I64 (2, 10): row 1's inputs padded
//                                                              after 12 tokens, row 0's labels -100 after 7 (T5)
//                               pixels           F32 (2, 3, S, S), caption_ids, caption_mask I64 (2, 16): N(0, 1)
//                                                              pixels, captions drawn from SEED (never the image
//                                                              token), row 1 padded after 12 (BLIP-2; no labels:
//                                                              the loss is labels=input_ids)
//                               loss             F32 (1,)      mean cross-entropy of logits against targets
//                               <HF name>        F32           d loss / d parameter, for every parameter
// --perturb: after saving, the computation uses the first bias (else the first norm weight) scaled by 1.01: the
// negative control, which the check must see. Exit 2 on bad arguments, 1 with the message on any error.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dump_tensors.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/models/blip2.hpp"
#include "tessera/models/direct_runner.hpp"
#include "tessera/models/llama.hpp"
#include "tessera/models/opt.hpp"
#include "tessera/models/t5.hpp"
#include "tessera/models/vit.hpp"

namespace {

constexpr double kInitStd = 0.08;
constexpr std::int64_t kBatch = 2, kSeqLen = 16;

using Named = std::vector<std::pair<std::string, at::Tensor>>;

// The batch the family's forward takes, and its tensors as they are written.
std::pair<tessera::models::TokenBatch, Named> make_batch(tessera::models::TokenSpec spec, at::Generator& gen) {
  tessera::models::TokenBatch batch{at::randint(spec.vocab_size, {kBatch, kSeqLen}, gen, at::kLong),
                                    at::randint(spec.vocab_size, {kBatch, kSeqLen}, gen, at::kLong)};
  batch.inputs[0][3] = 1;
  batch.inputs[1][0] = 1;
  return {batch, {{"tokens", batch.inputs}, {"targets", batch.targets}}};
}

std::pair<tessera::models::ImageBatch, Named> make_batch(const tessera::models::ImageSpec& spec, at::Generator& gen) {
  tessera::models::ImageBatch batch{
      at::randn({kBatch, spec.channels, spec.image_size, spec.image_size}, gen, at::kFloat),
      at::randint(spec.num_labels, {kBatch}, gen, at::kLong)};
  return {batch, {{"pixels", batch.pixels}, {"labels", batch.labels}}};
}

std::pair<tessera::models::Seq2SeqBatch, Named> make_batch(tessera::models::Seq2SeqSpec spec, at::Generator& gen) {
  using tessera::models::kIgnoreIndex;
  constexpr std::int64_t kLabels = 10;
  tessera::models::Seq2SeqBatch batch{at::randint(spec.vocab_size, {kBatch, kSeqLen}, gen, at::kLong),
                                      at::ones({kBatch, kSeqLen}, at::kLong),
                                      at::randint(spec.vocab_size, {kBatch, kLabels}, gen, at::kLong)};
  batch.inputs[1].narrow(0, 12, kSeqLen - 12).fill_(spec.pad_token_id);
  batch.attention_mask[1].narrow(0, 12, kSeqLen - 12).zero_();
  batch.labels[0].narrow(0, 7, kLabels - 7).fill_(kIgnoreIndex);
  return {batch, {{"input_ids", batch.inputs}, {"attention_mask", batch.attention_mask}, {"labels", batch.labels}}};
}

std::pair<tessera::models::CaptionBatch, Named> make_batch(const tessera::models::CaptionSpec& spec,
                                                          at::Generator& gen) {
  const auto size = spec.image.image_size;
  tessera::models::CaptionBatch batch{at::randn({kBatch, 3, size, size}, gen, at::kFloat),
                                      at::randint(2, spec.vocab_size, {kBatch, kSeqLen}, gen, at::kLong),
                                      at::ones({kBatch, kSeqLen}, at::kLong), at::Tensor()};
  batch.input_ids.masked_fill_(batch.input_ids.eq(spec.reserved_token_id), 2);
  batch.input_ids[1].narrow(0, 12, kSeqLen - 12).fill_(spec.pad_token_id);
  batch.attention_mask[1].narrow(0, 12, kSeqLen - 12).zero_();
  return {batch, {{"pixels", batch.pixels}, {"caption_ids", batch.input_ids}, {"caption_mask", batch.attention_mask}}};
}

template <class M>
void dump(const std::filesystem::path& config_json, const std::filesystem::path& out, std::uint64_t seed,
          bool perturb) {
  using namespace tessera;
  const typename M::Config config = M::read_config(config_json);
  const std::vector<ParamSpec> specs = M::parameters(config);
  ParamStore store(specs, at::kFloat, c10::Device(c10::kCPU));
  store.initialize(kInitStd, seed);

  // Non-trivial norms and biases, drawn in spec order from their own generator.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  std::vector<std::vector<at::Tensor>> views(store.num_units());
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    views[u] = store.unit_views(u, store.flat_param(u));
    for (std::size_t k = 0; k < views[u].size(); ++k) {
      const ParamSpec& s = specs[store.unit_specs(u)[k]];
      const at::Tensor noise = at::empty(s.shape, at::kFloat).normal_(0.0, 1.0, gen);
      if (s.init == ParamInit::ones) views[u][k].copy_(1.0 + 0.2 * noise);
      if (s.init == ParamInit::zeros) views[u][k].copy_(0.1 * noise);
    }
  }
  const std::filesystem::path model_dir = out / "model";
  store.save(model_dir, store.full_units());
  M::write_config(model_dir / "config.json", config, "float32");

  // Leaves requiring grad, one per parameter; the negative control scales one of them after saving.
  std::vector<std::vector<at::Tensor>> leaves(views.size());
  for (std::size_t u = 0; u < views.size(); ++u)
    for (const at::Tensor& v : views[u]) leaves[u].push_back(v.detach().clone());
  if (perturb) {
    auto first = [&](ParamInit init) -> at::Tensor* {
      for (std::size_t u = 0; u < leaves.size(); ++u)
        for (std::size_t k = 0; k < leaves[u].size(); ++k)
          if (specs[store.unit_specs(u)[k]].init == init) return &leaves[u][k];
      return nullptr;
    };
    at::Tensor* target = first(ParamInit::zeros);
    if (!target) target = first(ParamInit::ones);
    target->mul_(1.01);
  }
  for (auto& unit : leaves)
    for (at::Tensor& p : unit) p.requires_grad_(true);

  at::Generator batch_gen = at::make_generator<at::CPUGeneratorImpl>(seed + 2);
  auto [batch, tensors] = make_batch(M::data_spec(config), batch_gen);

  const typename M::Context ctx = M::make_context(config, kSeqLen, at::kFloat, c10::Device(c10::kCPU));
  models::DirectRunner<M> run(config, ctx, leaves);
  const at::Tensor loss = M::forward(config, run, batch);
  loss.backward();

  tensors.emplace_back("loss", loss.detach().reshape({1}));
  for (std::size_t u = 0; u < leaves.size(); ++u)
    for (std::size_t k = 0; k < leaves[u].size(); ++k) {
      const at::Tensor& g = leaves[u][k].grad();
      tensors.emplace_back(specs[store.unit_specs(u)[k]].name, g.defined() ? g : at::zeros_like(leaves[u][k]));
    }
  testing::write_named_tensors((out / "grads.safetensors").string(), tensors);
}

}  // namespace

int main(int argc, char** argv) {
  const bool perturb = argc == 6 && std::string_view(argv[5]) == "--perturb";
  if (argc != 5 && !perturb) {
    std::fprintf(stderr, "usage: %s llama|opt|t5|vit|blip2-opt|blip2-t5 CONFIG.json OUT_DIR SEED [--perturb]\n", argv[0]);
    return 2;
  }
  const std::string_view family = argv[1];
  try {
    const std::uint64_t seed = std::stoull(argv[4]);
    if (family == "llama")
      dump<tessera::models::Llama>(argv[2], argv[3], seed, perturb);
    else if (family == "opt")
      dump<tessera::models::Opt>(argv[2], argv[3], seed, perturb);
    else if (family == "t5")
      dump<tessera::models::T5>(argv[2], argv[3], seed, perturb);
    else if (family == "vit")
      dump<tessera::models::Vit>(argv[2], argv[3], seed, perturb);
    else if (family == "blip2-opt")
      dump<tessera::models::Blip2Opt>(argv[2], argv[3], seed, perturb);
    else if (family == "blip2-t5")
      dump<tessera::models::Blip2T5>(argv[2], argv[3], seed, perturb);
    else {
      std::fprintf(stderr, "family_dump: family '%s' is not one of llama, opt, t5, vit, blip2-opt, blip2-t5\n",
                   argv[1]);
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "family_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
