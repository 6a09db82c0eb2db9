#pragma once
// defines: the runtime side of Lora/QLora: LoraSettings (r, alpha, dropout, targets, from the run config or
// a PEFT adapter directory), the adapted sites of a model, the adapter parameters' specs (PEFT names), and
// PEFT directories: adapter_config.json + adapter_model.safetensors, tensors named
//   base_model.model.<module>.lora_A.weight  (r, in)     base_model.model.<module>.lora_B.weight  (out, r)
// where <module> is the Hugging Face module path, e.g. model.layers.0.self_attn.q_proj.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "tessera/config/run_config.hpp"
#include "tessera/core/param_spec.hpp"
#include "tessera/core/partial_files.hpp"

namespace tessera {

class ParamStore;

struct LoraSettings {
  std::int64_t r = 16;
  double alpha = 32.0;
  double dropout = 0.05;
  std::vector<std::string> targets{"q_proj", "v_proj"};  // module name suffixes, as PEFT's target_modules
  bool rslora = false;                                   // PEFT use_rslora: scaling alpha / sqrt(r)
  std::string source;                                    // the adapter dir they came from, or empty
  double scaling() const;
};

// lora_r, lora_alpha, lora_dropout and lora_targets from the run config; with adapter=DIR, r, lora_alpha,
// target_modules (and use_rslora) from DIR/adapter_config.json instead, which must describe a plain LoRA
// adapter (FormatError naming the file and the key otherwise).
// family_targets: what lora_targets=auto means (models::default_lora_targets of the family).
LoraSettings lora_settings(const RunConfig& cfg, std::string_view family_targets);

// One adapted linear: its base parameter, module path and shape.
struct LoraSite {
  std::size_t base_spec = 0;  // index into the base specs
  std::string module;         // e.g. "model.layers.0.self_attn.q_proj"
  std::int64_t in = 0, out = 0;
};

// Every linear weight of the base (ParamSpec::linear) whose module path ends in a target (PEFT's rule: equal
// to it or ending in "." + target). ConfigError when a target matches nothing, listing the model's linear names.
std::vector<LoraSite> lora_sites(std::span<const ParamSpec> base, std::span<const std::string> targets);
// Per site, in order: lora_A (r, in), kaiming-uniform, and lora_B (out, r), zeros, in the site's unit.
std::vector<ParamSpec> lora_specs(std::span<const ParamSpec> base, std::span<const LoraSite> sites, std::int64_t r);

// Inverted dropout of probability p with a mask drawn from `seed` on x's device: the same seed gives the same
// mask (a checkpointed block's recomputation must drop what its forward dropped).
at::Tensor lora_dropout(const at::Tensor& x, double p, std::uint64_t seed);

// Writes adapter_config.json and adapter_model.safetensors from the adapter store's full units into a
// directory staged beside DIR (core/partial_files.hpp) and returns it uncommitted; commit() moves it to DIR.
// task_type: PEFT's (models::peft_task_type of the family's batch), empty for none.
StagedDir stage_peft_dir(const std::filesystem::path& dir, const LoraSettings& settings, const ParamStore& adapters,
                         const std::string& base_model, std::string_view task_type);
// Loads DIR/adapter_model.safetensors into the adapter store (FormatError on a missing, misshapen or
// unknown tensor).
void load_peft_weights(ParamStore& adapters, const std::filesystem::path& dir);

}  // namespace tessera
