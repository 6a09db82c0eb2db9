// implements: the seed keys' spellings and the check of the given ones (seed_keys.hpp).
#include "tessera/engine/seed_keys.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera {

namespace detail {

std::vector<std::string> precision_names(std::string_view name) {
  if (name == "32-true") return spelled({"32-true", "32", "fp32"});
  if (name == "bf16-mixed") return spelled({"bf16-mixed", "bf16"});
  if (name == "16-mixed") return spelled({"16-mixed", "16", "fp16"});
  return spelled({name});
}

std::vector<std::string> optimizer_names(std::string_view name, bool offloaded) {
  if (name == "adamw") return offloaded ? spelled({"deepspeed_cpu", "adamw"}) : spelled({"adamw"});
  if (name == "adam8bit") return spelled({"adam_8bit", "adam8bit"});
  return spelled({name});
}

std::vector<std::string> bool_names(bool value) {
  return value ? spelled({"true", "True", "1"}) : spelled({"false", "False", "0"});
}

}  // namespace detail

SeedArgs split_seed_args(std::span<const std::string_view> args, std::span<const SeedChoice> choices) {
  SeedArgs out;
  for (const std::string_view arg : args) {
    const std::size_t eq = arg.find('=');
    const std::string_view key = eq == std::string_view::npos ? std::string_view() : arg.substr(0, eq);
    const bool seed_key =
        std::any_of(choices.begin(), choices.end(), [&](const SeedChoice& c) { return c.key == key; });
    if (seed_key) out.given.emplace_back(key, arg.substr(eq + 1));
    else out.rest.push_back(arg);
  }
  return out;
}

void check_seed_args(const SeedArgs& args, std::span<const SeedChoice> choices) {
  std::string problems;
  for (const auto& [key, value] : args.given) {
    const auto c = std::find_if(choices.begin(), choices.end(), [&](const SeedChoice& s) { return s.key == key; });
    if (std::find(c->accepted.begin(), c->accepted.end(), value) != c->accepted.end()) continue;
    if (!problems.empty()) problems += "\n";
    problems += std::string(key) + "=" + std::string(value) + ": this binary is " + std::string(key) + "=" + c->value;
    if (key == "devices")
      problems += " (the job's ranks); start " + std::string(value) + " ranks with mpirun -np " + std::string(value) +
                  " (or srun -n " + std::string(value) + "), or drop devices=";
    else
      problems += ", fixed when it was compiled; run the binary built with that policy (build/catalogue/ or "
                  "build/examples/, tessera-catalogue lists them), or drop " + std::string(key) + "=";
  }
  if (!problems.empty()) throw ConfigError(problems);
}

}  // namespace tessera
