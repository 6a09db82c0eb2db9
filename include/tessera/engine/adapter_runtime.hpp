#pragma once
// defines: the adapter side of a run, AdapterRuntimeOf<Model, Adapter, Precision>: NoAdapterRuntime when the
// model trains itself, LoraRuntime under Lora/QLora. The Trainer asks both the same things:
//   store_specs()            what the trained store holds: the model's parameters, or the adapters (PEFT names)
//   fill(store, weights)     the trained store's first values (preset initialisation, model_dir, adapter=DIR)
//   compute(c, inputs, p, at, gemm)   one call: the family's compute on the engine's parameters, or on the frozen
//                            base with LoRA's path added to every adapted linear; its products through gemm
//   frozen_bytes/numel       the frozen base, for the memory and experiment tables
//   stage_save(dir, store, full)   save_dir: the model's HF dir; under Lora a PEFT dir, or the merged model
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/engine/frozen_base.hpp"
#include "tessera/engine/lora.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/runtime.hpp"
#include "tessera/engine/save.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/models/model_family.hpp"

namespace tessera {

// Where a call runs, for LoRA's dropout masks: one mask per (seed, rank, step, micro-step, call, linear).
struct CallPosition {
  std::int64_t rank = 0, step = 0, micro = 0;
};

template <class Model, class Precision>
class NoAdapterRuntime {
 public:
  using Config = typename Model::Config;
  NoAdapterRuntime(const RunConfig& cfg, const Config& model, const std::optional<io::CheckpointDir>&, c10::Device)
      : cfg_(cfg), model_(model) {}

  std::vector<ParamSpec> store_specs() const { return Model::parameters(model_); }
  void fill(ParamStore& store, const std::optional<io::CheckpointDir>& weights) const {
    if (weights)
      store.load(*weights);
    else
      store.initialize(model_.initializer_range, static_cast<std::uint64_t>(cfg_.seed));
  }
  at::Tensor compute(const typename Model::Context& ctx, std::size_t c, std::span<const at::Tensor> inputs,
                     const std::vector<std::vector<at::Tensor>>& params, const CallPosition&,
                     const ops::Gemm& gemm) const {
    return Model::compute(model_, ctx, c, models::CallWeights{params, nullptr, gemm}, inputs);
  }
  std::int64_t frozen_bytes() const { return 0; }
  std::int64_t frozen_numel() const { return 0; }
  StagedDir stage_save(const std::filesystem::path& dir, const ParamStore& store, std::span<const at::Tensor> full) const {
    return stage_hf_dir<Model>(dir, model_, store, full, cfg_.model_dir);
  }

 private:
  const RunConfig& cfg_;
  const Config& model_;
};

template <class Model, class Adapter, class Precision>
class LoraRuntime {
 public:
  using Config = typename Model::Config;

  // The frozen base, quantized where the policy says, from the preset's initialisation (the same weights a full
  // fine-tuning run starts from) or model_dir; the adapted linears from lora_targets (or adapter=DIR).
  LoraRuntime(const RunConfig& cfg, const Config& model, const std::optional<io::CheckpointDir>& weights,
              c10::Device device)
      : cfg_(cfg),
        model_(model),
        lora_(lora_settings(cfg, models::default_lora_targets<Model>())),
        calls_(Model::calls(model)) {
    const std::vector<ParamSpec> specs = Model::parameters(model_);
    sites_ = lora_sites(specs, lora_.targets);
    constexpr bool quantizes = Adapter::quantizes_base;
    ParamStore base(specs, quantizes ? c10::ScalarType::Float : Precision::compute_dtype,
                    quantizes ? host_of(device) : device);
    if (weights)
      base.load(*weights);
    else
      base.initialize(model_.initializer_range, static_cast<std::uint64_t>(cfg_.seed));
    // bitsandbytes quantizes the linear layers and leaves embeddings, norms and the LM head dense.
    std::vector<bool> quantize(specs.size(), false);
    for (std::size_t i = 0; i < specs.size(); ++i) quantize[i] = quantizes && specs[i].linear;
    base_.emplace(base, quantize, Adapter::double_quant, Precision::compute_dtype, device);
    site_index_.assign(specs.size(), -1);
    std::vector<int> per_unit(base.num_units(), 0);
    for (const LoraSite& site : sites_) site_index_[site.base_spec] = per_unit[specs[site.base_spec].unit]++;
    num_units_ = base.num_units();
  }

  // Per site: lora_A (r, in) and lora_B (out, r) in the site's unit; units without sites stay empty.
  std::vector<ParamSpec> store_specs() const { return lora_specs(base_->specs(), sites_, lora_.r); }
  std::size_t num_units() const { return num_units_; }
  void fill(ParamStore& store, const std::optional<io::CheckpointDir>&) const {
    if (cfg_.adapter.empty())
      store.initialize(model_.initializer_range, static_cast<std::uint64_t>(cfg_.seed));
    else
      load_peft_weights(store, cfg_.adapter);
  }

  // The call's linears: the frozen base (dequantized on the fly under QLora) plus, on the adapted ones,
  // (alpha/r) * dropout(h) A^T B^T with this call's adapter views (A and B of a unit's j-th site at 2j, 2j+1).
  at::Tensor compute(const typename Model::Context& ctx, std::size_t c, std::span<const at::Tensor> inputs,
                     const std::vector<std::vector<at::Tensor>>& adapters, const CallPosition& at,
                     const ops::Gemm& gemm) const {
    const std::vector<std::size_t>& units = calls_[c].units;
    models::CallWeights w;
    w.gemm = gemm;
    for (std::size_t u : units) w.units.push_back(base_->unit(u));
    const models::LinearFn linear = [&](std::size_t k, std::size_t j, const at::Tensor& h, const at::Tensor& bias) {
      const std::size_t spec = base_->spec_of(units[k], j);
      at::Tensor y = base_->linear(spec, h, gemm);
      if (bias.defined()) y = y + bias;
      const int site = site_index_[spec];
      if (site < 0) return y;
      const at::Tensor in = lora_.dropout > 0 ? lora_dropout(h, lora_.dropout, dropout_seed(at, c, spec)) : h;
      const std::vector<at::Tensor>& ad = adapters[k];
      return y + gemm.linear(gemm.linear(in, ad[2 * site]), ad[2 * site + 1]) * lora_.scaling();
    };
    w.adapter = &linear;
    return Model::compute(model_, ctx, c, w, inputs);
  }

  std::int64_t frozen_bytes() const { return base_->bytes(); }
  std::int64_t frozen_numel() const {
    std::int64_t n = 0;
    for (const auto& s : base_->specs()) n += s.numel();
    return n;
  }
  const FrozenBase& base() const { return *base_; }
  const LoraSettings& settings() const { return lora_; }
  const std::vector<LoraSite>& sites() const { return sites_; }

  // save_dir: the adapters as a PEFT dir, or (merge_adapter=true) the merged model as a HF dir.
  StagedDir stage_save(const std::filesystem::path& dir, const ParamStore& store, std::span<const at::Tensor>) const {
    if (!cfg_.merge_adapter)
      return stage_peft_dir(dir, lora_, store, cfg_.model_dir.empty() ? cfg_.model : cfg_.model_dir,
                            models::peft_task_type<typename Model::Batch>);
    at::NoGradGuard no_grad;
    ParamStore merged(base_->specs(), Precision::compute_dtype, c10::Device(c10::kCPU));
    for (std::size_t u = 0; u < merged.num_units(); ++u) {
      const std::vector<at::Tensor> views = merged.unit_views(u, merged.flat_param(u));
      const std::vector<at::Tensor> adapters = store.unit_views(u, store.full_units()[u]);
      for (std::size_t k = 0; k < views.size(); ++k) {
        const std::size_t spec = merged.unit_specs(u)[k];
        at::Tensor w = base_->weight(spec, c10::ScalarType::Float).cpu();
        if (const int j = site_index_[spec]; j >= 0) {
          const at::Tensor a = adapters[2 * j].to(at::kCPU, at::kFloat), b = adapters[2 * j + 1].to(at::kCPU, at::kFloat);
          w = w + at::matmul(b, a) * lora_.scaling();
        }
        views[k].copy_(w);
      }
    }
    return stage_hf_dir<Model>(dir, model_, merged, merged.full_units(), cfg_.model_dir);
  }

 private:
  std::uint64_t dropout_seed(const CallPosition& at, std::size_t call, std::size_t spec) const {
    std::uint64_t h = static_cast<std::uint64_t>(cfg_.seed);
    for (std::uint64_t v : {static_cast<std::uint64_t>(at.rank), static_cast<std::uint64_t>(at.step),
                            static_cast<std::uint64_t>(at.micro), static_cast<std::uint64_t>(call),
                            static_cast<std::uint64_t>(spec)})
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
  }

  const RunConfig& cfg_;
  const Config& model_;
  LoraSettings lora_;
  std::vector<models::CallInfo> calls_;
  std::vector<LoraSite> sites_;
  std::optional<FrozenBase> base_;
  std::vector<int> site_index_;  // per base parameter: its index among its unit's adapted linears, or -1
  std::size_t num_units_ = 0;
};

template <class Model, class Adapter, class Precision>
using AdapterRuntimeOf = std::conditional_t<Adapter::trains_adapters, LoraRuntime<Model, Adapter, Precision>,
                                            NoAdapterRuntime<Model, Precision>>;

}  // namespace tessera
