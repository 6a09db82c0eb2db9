// implements: checkpointed_blocks and wrapped_units (engine/block_selection.hpp).
#include "tessera/engine/block_selection.hpp"

#include <algorithm>
#include <set>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

std::vector<std::string> names_in(const std::string& setting) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= setting.size()) {
    const std::size_t comma = std::min(setting.find(',', start), setting.size());
    std::string name = setting.substr(start, comma - start);
    const std::size_t first = name.find_first_not_of(' ');
    if (first != std::string::npos) out.push_back(name.substr(first, name.find_last_not_of(' ') - first + 1));
    start = comma + 1;
  }
  return out;
}

std::string block_types(std::span<const models::UnitInfo> units) {
  std::set<std::string> types;
  for (const auto& u : units)
    if (u.is_block()) types.insert(u.block_type);
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "" : ", ") + t;
  return out.empty() ? "(none)" : out;
}

std::string other_modules(std::span<const models::UnitInfo> units) {
  std::string out;
  for (const auto& u : units)
    if (!u.is_block()) out += (out.empty() ? "" : ", ") + u.module;
  return out.empty() ? "(none)" : out;
}

// Flags the units that `setting` names; modules: names may also be module paths (by suffix).
std::vector<bool> select(std::string_view key, const std::string& setting, std::span<const models::UnitInfo> units,
                         std::string_view family, bool modules) {
  const std::vector<std::string> names = names_in(setting);
  std::vector<bool> out(units.size(), false);
  for (const std::string& name : names) {
    if (name == "all") {
      for (std::size_t u = 0; u < units.size(); ++u) out[u] = out[u] || units[u].is_block();
      continue;
    }
    if (name == "none") {
      if (modules && names.size() == 1) continue;
      throw ConfigError(std::string(key) + "=" + setting + ": " +
                        (modules ? "none means no wrapped unit and goes alone; drop the other names or drop none"
                                 : "none is not a choice here; to checkpoint nothing build the experiment with "
                                   "NoCheckpoint, else name block types or all"));
    }
    bool found = false;
    for (std::size_t u = 0; u < units.size(); ++u)
      if (units[u].block_type == name || (modules && models::module_matches(units[u].module, name))) {
        out[u] = true;
        found = true;
      }
    if (!found)
      throw ConfigError(std::string(key) + "=" + setting + ": '" + name + "' is no block type" +
                        (modules ? " or module" : "") + " of " + std::string(family) + "; its block types are " +
                        block_types(units) + (modules ? " and its other units " + other_modules(units) : "") +
                        (modules ? " (or all, or none)" : " (or all)"));
  }
  return out;
}

}  // namespace

std::vector<bool> checkpointed_blocks(const std::string& setting, std::span<const models::UnitInfo> units,
                                      std::string_view family) {
  return select("checkpoint_blocks", setting, units, family, false);
}

std::vector<bool> wrapped_units(const std::string& setting, std::span<const models::UnitInfo> units,
                                std::string_view family) {
  return select("wrap_blocks", setting, units, family, true);
}

std::vector<bool> frozen_units(const std::string& setting, std::span<const models::UnitInfo> units,
                               std::string_view family) {
  std::vector<bool> out(units.size(), false);
  const std::vector<std::string> names = names_in(setting);
  if (names.size() == 1 && names[0] == "none") return out;
  for (const std::string& name : names) {
    if (name == "none" || name == "all")
      throw ConfigError("freeze=" + setting + ": " +
                        (name == "none" ? std::string("none means nothing frozen and goes alone; drop the other names")
                                        : std::string("all would leave nothing to train; name the parts to freeze")));
    bool found = false;
    for (std::size_t u = 0; u < units.size(); ++u) {
      const std::string& m = units[u].module;
      if (m == name || (m.size() > name.size() && m.compare(0, name.size(), name) == 0 && m[name.size()] == '.')) {
        out[u] = true;
        found = true;
      }
    }
    if (!found) {
      std::set<std::string> tops;  // each unit's first path component, what freeze= usually names
      for (const auto& u : units) tops.insert(u.module.substr(0, u.module.find('.')));
      std::string list;
      for (const auto& t : tops) list += (list.empty() ? "" : ", ") + t;
      throw ConfigError("freeze=" + setting + ": '" + name + "' is no module of " + std::string(family) +
                        "; name a module path such as " + list + " (or a deeper one, e.g. " + units.front().module +
                        "), or none");
    }
  }
  if (std::all_of(out.begin(), out.end(), [](bool f) { return f; }))
    throw ConfigError("freeze=" + setting + " freezes every part of " + std::string(family) +
                      ", so nothing would train; leave at least one part out");
  return out;
}

}  // namespace tessera
