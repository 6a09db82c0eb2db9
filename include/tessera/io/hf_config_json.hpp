#pragma once
// defines: HfConfigJson, reading a Hugging Face config.json key by key for a model family's read_config (every
// message names the file, the key, what it holds and what it must hold), and find_preset, a family's preset by
// name (ConfigError listing the family's names otherwise).
#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"

namespace tessera::io {

class HfConfigJson {
 public:
  // Reads the file (io::read_json_file) and checks that model_type is `model_type`; `family` names the family in
  // messages ("Llama", "OPT").
  HfConfigJson(const std::filesystem::path& path, std::string_view model_type, std::string_view family);
  // A config nested in another (BLIP-2's "text_config"): `json` itself, named `where` in messages
  // ("<file>: text_config"); FormatError when it is not an object or its model_type differs.
  HfConfigJson(nlohmann::json json, std::string where, std::string_view model_type, std::string_view family);
  // The object under `key` of this one, as a config of its own (absent or not an object: FormatError).
  HfConfigJson nested(const char* key, std::string_view model_type, std::string_view family) const;

  const nlohmann::json& json() const { return j_; }
  const std::string& where() const { return where_; }
  bool present(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  std::int64_t integer(const char* key) const;  // required
  double number_or(const char* key, double fallback) const;  // absent or null: fallback
  // A boolean or string key may be absent, but not null: Hugging Face writes no null there.
  bool boolean_or(const char* key, bool fallback) const;
  std::string string_or(const char* key, std::string fallback) const;
  // FormatError "<file>: "<key>" must be <wanted>, got <type> <excerpt>".
  FormatError wrong(std::string_view key, std::string_view wanted, const nlohmann::json& value) const;
  // `config` after config.validate(where()), whose ConfigError becomes a FormatError: the file is at fault, not a
  // setting.
  template <class Config>
  Config checked(Config config) const {
    try {
      config.validate(where_);
    } catch (const ConfigError& e) {
      throw FormatError(e.what());
    }
    return config;
  }

 private:
  std::string where_;
  nlohmann::json j_;
};

// Writes a family's config.json text (and a final newline) to `path`; Error naming the file when it cannot.
void write_config_json(const std::filesystem::path& path, const std::string& text);

// The names of `table`'s presets, in table order (a family's preset_names()).
template <class Config, std::size_t N>
std::array<std::string_view, N> preset_names(const std::array<std::pair<std::string_view, Config>, N>& table) {
  std::array<std::string_view, N> names{};
  for (std::size_t i = 0; i < N; ++i) names[i] = table[i].first;
  return names;
}

// The preset called `name` in `table` (pairs of name and config); ConfigError "model=<name>: no such preset;
// choose one of ..., or set model_dir= to a Hugging Face <family> directory" otherwise.
template <class Config, std::size_t N>
const Config& find_preset(const std::array<std::pair<std::string_view, Config>, N>& table, std::string_view name,
                          std::string_view family) {
  for (const auto& [key, config] : table)
    if (key == name) return config;
  std::string valid;
  for (const auto& entry : table) valid += (valid.empty() ? "" : ", ") + std::string(entry.first);
  throw ConfigError("model=" + std::string(name) + ": no such preset; choose one of " + valid +
                    ", or set model_dir= to a Hugging Face " + std::string(family) + " directory");
}

}  // namespace tessera::io
