// implements: spec_fingerprint (engine/trainer_state.hpp), the layout check of a training-state checkpoint.
#include "tessera/engine/trainer_state.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/param_spec.hpp"

namespace tessera::detail {

std::string spec_fingerprint(const std::vector<ParamSpec>& specs) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&](std::string_view bytes) {
    for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  };
  for (const ParamSpec& s : specs) {
    mix(s.name);
    for (std::int64_t d : s.shape) mix(std::to_string(d) + ",");
    mix(";");
  }
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace tessera::detail
