// implements: engine/lora.hpp.
#include "tessera/engine/lora.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <cerrno>
#include <cstring>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/io/safetensors.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

std::vector<std::string> split_targets(const std::string& list) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : list + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

[[noreturn]] void bad_adapter(const fs::path& file, const std::string& what) {
  throw FormatError(file.string() + ": " + what);
}

}  // namespace

double LoraSettings::scaling() const {
  return rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
}

LoraSettings lora_settings(const RunConfig& cfg, std::string_view family_targets) {
  LoraSettings s;
  s.r = cfg.lora_r;
  s.alpha = cfg.lora_alpha;
  s.dropout = cfg.lora_dropout;
  if (cfg.lora_targets == "auto" && family_targets.empty() && cfg.adapter.empty())
    throw ConfigError("lora_targets=auto: this model family names no default targets; set lora_targets to the linear "
                      "modules to adapt");
  s.targets = split_targets(cfg.lora_targets == "auto" ? std::string(family_targets) : cfg.lora_targets);
  if (cfg.adapter.empty()) return s;
  const fs::path file = fs::path(cfg.adapter) / kConfigFile;
  const nlohmann::json j = io::read_json_file(file, "adapter= needs a PEFT LoRA directory with adapter_config.json");
  if (!j.is_object()) bad_adapter(file, "is not a JSON object");
  if (j.contains("peft_type") && j["peft_type"] != "LORA")
    bad_adapter(file, "peft_type is " + io::json_excerpt(j["peft_type"]) + "; only LORA adapters are supported");
  // A parsed non-negative integer is stored unsigned; a negative one, a float or any other type is not.
  const nlohmann::json r = j.value("r", nlohmann::json());
  if (!r.is_number_unsigned() || r.get<std::uint64_t>() < 1 || r.get<std::uint64_t>() > static_cast<std::uint64_t>(limits::lora_r))
    bad_adapter(file, "needs an integer r in [1, " + std::to_string(limits::lora_r) + "] (the adapter rank), got " +
                          (j.contains("r") ? io::json_excerpt(r, 80) : std::string("no r")));
  s.r = j["r"].get<std::int64_t>();
  auto typed = [&](const char* key, bool ok, const char* wanted) {
    if (j.contains(key) && !j[key].is_null() && !ok)
      bad_adapter(file, std::string("\"") + key + "\" must be " + wanted + ", got " + io::json_type_phrase(j[key]) + " " +
                            io::json_excerpt(j[key], 80));
    return j.contains(key) && !j[key].is_null();
  };
  if (typed("lora_alpha", j.value("lora_alpha", nlohmann::json()).is_number(), "a number"))
    s.alpha = j["lora_alpha"].get<double>();
  else
    s.alpha = 8.0;  // PEFT's default
  if (!(std::isfinite(s.alpha) && s.alpha > 0)) bad_adapter(file, "lora_alpha must be a finite number > 0");
  if (typed("use_rslora", j.value("use_rslora", nlohmann::json()).is_boolean(), "a boolean (true or false)"))
    s.rslora = j["use_rslora"].get<bool>();
  if (!j.contains("target_modules")) bad_adapter(file, "has no target_modules");
  const auto& t = j["target_modules"];
  if (t.is_string()) {
    s.targets = split_targets(t.get<std::string>());
  } else if (t.is_array()) {
    s.targets.clear();
    for (const auto& e : t) {
      if (!e.is_string()) bad_adapter(file, "target_modules must hold module names");
      s.targets.push_back(e.get<std::string>());
    }
  } else {
    bad_adapter(file, "target_modules must be a list of module names");
  }
  if (j.contains("bias") && j["bias"] != "none")
    bad_adapter(file, "bias is " + io::json_excerpt(j["bias"]) + "; only bias \"none\" adapters are supported");
  if (typed("fan_in_fan_out", j.value("fan_in_fan_out", nlohmann::json()).is_boolean(), "a boolean (true or false)") &&
      j["fan_in_fan_out"].get<bool>())
    bad_adapter(file, "fan_in_fan_out is true; tessera's linears (nn.Linear, (out, in) weights) need false");
  // PEFT variants that change the forward or train more than A and B: training them as plain LoRA would be silently
  // wrong. PEFT writes these keys as false / null for a plain LoRA adapter.
  if (typed("use_dora", j.value("use_dora", nlohmann::json()).is_boolean(), "a boolean (true or false)") &&
      j["use_dora"].get<bool>())
    bad_adapter(file, "use_dora is true; DoRA adapters (a learned magnitude per output) are not supported, plain LoRA is");
  if (typed("lora_bias", j.value("lora_bias", nlohmann::json()).is_boolean(), "a boolean (true or false)") &&
      j["lora_bias"].get<bool>())
    bad_adapter(file, "lora_bias is true; adapters with a bias on lora_B are not supported");
  if (j.contains("modules_to_save") && !j["modules_to_save"].is_null() && !j["modules_to_save"].empty())
    bad_adapter(file, "modules_to_save is " + io::json_excerpt(j["modules_to_save"], 80) +
                          "; fully trained extra modules are not supported, only lora_A/lora_B adapters");
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    if (j.contains(key) && !j[key].is_null() && !j[key].empty())
      bad_adapter(file, std::string(key) + " is set; per-module ranks or alphas are not supported");
  if (j.contains("layers_to_transform") && !j["layers_to_transform"].is_null())
    bad_adapter(file, "layers_to_transform is set; adapters on every layer are supported only");
  // The run config may repeat the dir's shape but not contradict it (a value left at its default is not a claim).
  const RunConfig defaults;
  auto conflict = [&](const char* key, const std::string& given, const std::string& dir_value) {
    throw ConfigError(std::string(key) + "=" + given + ": contradicts adapter=" + cfg.adapter + ", whose " +
                      kConfigFile + " says " + dir_value + "; drop " + key + " (the adapter dir sets it)");
  };
  if (cfg.lora_r != defaults.lora_r && cfg.lora_r != s.r)
    conflict("lora_r", std::to_string(cfg.lora_r), "r " + std::to_string(s.r));
  if (cfg.lora_alpha != defaults.lora_alpha && cfg.lora_alpha != s.alpha)
    conflict("lora_alpha", nlohmann::json(cfg.lora_alpha).dump(), "lora_alpha " + nlohmann::json(s.alpha).dump());
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  if (cfg.lora_targets != defaults.lora_targets && sorted(split_targets(cfg.lora_targets)) != sorted(s.targets))
    conflict("lora_targets", cfg.lora_targets, "target_modules " + nlohmann::json(s.targets).dump());
  s.source = cfg.adapter;
  return s;
}

std::vector<LoraSite> lora_sites(std::span<const ParamSpec> base, std::span<const std::string> targets) {
  std::vector<LoraSite> sites;
  std::set<std::string> used, linear_names;
  constexpr std::string_view suffix = ".weight";
  for (std::size_t i = 0; i < base.size(); ++i) {
    const ParamSpec& p = base[i];
    if (!p.linear || p.name.size() <= suffix.size() ||
        p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string module = p.name.substr(0, p.name.size() - suffix.size());
    linear_names.insert(module.substr(module.rfind('.') + 1));
    for (const std::string& t : targets)
      if (models::module_matches(module, t)) {
        sites.push_back(LoraSite{i, module, p.shape[1], p.shape[0]});
        used.insert(t);
        break;
      }
  }
  for (const std::string& t : targets)
    if (!used.count(t)) {
      std::string names;
      for (const std::string& n : linear_names) names += (names.empty() ? "" : ", ") + n;
      throw ConfigError("lora_targets: '" + t + "' names no linear layer of the model; its linear layers are " +
                        names);
    }
  return sites;
}

std::vector<ParamSpec> lora_specs(std::span<const ParamSpec> base, std::span<const LoraSite> sites, std::int64_t r) {
  std::vector<ParamSpec> specs;
  for (const LoraSite& s : sites) {
    const std::size_t unit = base[s.base_spec].unit;
    specs.push_back({"base_model.model." + s.module + ".lora_A.weight", {r, s.in}, unit, ParamInit::kaiming_uniform});
    specs.push_back({"base_model.model." + s.module + ".lora_B.weight", {s.out, r}, unit, ParamInit::zeros});
  }
  return specs;
}

at::Tensor lora_dropout(const at::Tensor& x, double p, std::uint64_t seed) {
  if (x.is_meta()) return x * at::empty(x.sizes(), x.options()) * (1.0 / (1.0 - p));  // a dry run: the same buffers
  at::Generator gen = x.device().is_cpu() ? at::make_generator<at::CPUGeneratorImpl>(seed)
                                          : at::globalContext().defaultGenerator(x.device()).clone();
  gen.set_current_seed(seed);
  const at::Tensor keep = at::empty(x.sizes(), x.options()).bernoulli_(1.0 - p, gen);
  return x * keep * (1.0 / (1.0 - p));
}

StagedDir stage_peft_dir(const fs::path& dir, const LoraSettings& settings, const ParamStore& adapters,
                         const std::string& base_model, std::string_view task_type) {
  StagedDir staged(dir);
  const fs::path& tmp = staged.path();
  std::set<std::string> modules;
  for (const std::string& t : settings.targets) modules.insert(t);
  const nlohmann::json config = {
      {"peft_type", "LORA"},          {"task_type", task_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(task_type)},
      {"base_model_name_or_path", base_model},
      {"r", settings.r},              {"lora_alpha", settings.alpha},
      {"lora_dropout", settings.dropout},
      {"target_modules", std::vector<std::string>(modules.begin(), modules.end())},
      {"bias", "none"},               {"fan_in_fan_out", false},
      {"use_rslora", settings.rslora}, {"inference_mode", true},
      {"init_lora_weights", true},    {"modules_to_save", nullptr}};
  std::ofstream config_file(tmp / kConfigFile);
  config_file << config.dump(2) << "\n";
  config_file.close();
  if (!config_file) throw Error((tmp / kConfigFile).string() + ": cannot write: " + std::strerror(errno));
  std::vector<at::Tensor> host;
  std::vector<io::TensorView> views;
  const auto& specs = adapters.specs();
  for (std::size_t u = 0; u < adapters.num_units(); ++u) {
    const std::vector<at::Tensor> params = adapters.unit_views(u, adapters.full_units()[u]);
    for (std::size_t k = 0; k < params.size(); ++k) {
      host.push_back(params[k].detach().to(at::kCPU).contiguous());
      views.push_back(tensor_view(specs[adapters.unit_specs(u)[k]].name, host.back()));
    }
  }
  io::write_safetensors(tmp / kWeightsFile, views, {{"format", "pt"}});
  return staged;
}

void load_peft_weights(ParamStore& adapters, const fs::path& dir) {
  adapters.load(io::CheckpointDir::open_file(dir / kWeightsFile));
}

}  // namespace tessera
