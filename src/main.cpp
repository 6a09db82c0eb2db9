// implements: the parts of tessera::main (main.hpp) that do not depend on the experiment type.
#include "tessera/main.hpp"

#include <cmath>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

namespace tessera {

int dry_run_ranks(std::string_view value) {
  int n = 0;
  for (const char c : value) {
    if (c < '0' || c > '9' || n > 1'000'000) n = -1;
    if (n < 0) break;
    n = n * 10 + (c - '0');
  }
  if (value.empty() || n < 1)
    throw ConfigError("devices=" + std::string(value) + ": --dry-run predicts for this many ranks; give a whole number "
                      ">= 1, e.g. devices=4");
  return n;
}

nlohmann::json prediction_record(const predict::Prediction& p) {
  nlohmann::json phases = nlohmann::json::array();
  for (const memory::MemorySnapshot& s : p.phases)
    phases.push_back({{"phase", memory::phase_label(s.phase)}, {"params", s.owned.params}, {"grads", s.owned.grads},
                      {"optim", s.owned.optim}, {"optim_cpu", s.owned.optim_cpu}, {"params_cpu", s.owned.params_cpu},
                      {"grads_cpu", s.owned.grads_cpu}, {"acts", s.acts}, {"allocated", p.device_allocated(s)}});
  return {{"event", "prediction"},   {"world_size", p.world_size},       {"peak", p.device_peak()},
          {"host", p.host},          {"phases", phases},                 {"all_reduce", p.comm.all_reduce},
          {"all_gather", p.comm.all_gather}, {"reduce_scatter", p.comm.reduce_scatter},
          {"step_flops", p.step_flops}};
}

double launch_timeout_s(std::span<const std::string_view> args) {
  double timeout = RunConfig{}.collective_timeout_s;
  constexpr std::string_view key = "collective_timeout_s=";
  for (const std::string_view a : args) {
    if (!a.starts_with(key)) continue;
    const std::string value(a.substr(key.size()));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (!value.empty() && end == value.c_str() + value.size() && std::isfinite(v) && v >= 0 && v <= 1e7) timeout = v;
  }
  return timeout;
}

}  // namespace tessera
