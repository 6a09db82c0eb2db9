// implements: HfConfigJson (io/hf_config_json.hpp).
#include "tessera/io/hf_config_json.hpp"

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <utility>

#include "tessera/io/json_file.hpp"

namespace tessera::io {

HfConfigJson::HfConfigJson(const std::filesystem::path& path, std::string_view model_type, std::string_view family)
    : where_(path.string()),
      j_(read_json_file(path, "a Hugging Face " + std::string(family) + " directory needs its config.json")) {
  if (!j_.is_object()) throw FormatError(where_ + ": top level must be a JSON object, got " + json_type_phrase(j_));
  const std::string type = string_or("model_type", "");
  if (type != model_type)
    throw FormatError(where_ + ": model_type is \"" + type + "\"; tessera's " + std::string(family) +
                      " family reads model_type \"" + std::string(model_type) + "\"");
}

HfConfigJson::HfConfigJson(nlohmann::json json, std::string where, std::string_view model_type,
                           std::string_view family)
    : where_(std::move(where)), j_(std::move(json)) {
  if (!j_.is_object()) throw FormatError(where_ + ": must be a JSON object, got " + json_type_phrase(j_));
  const std::string type = string_or("model_type", std::string(model_type));
  if (type != model_type)
    throw FormatError(where_ + ": model_type is \"" + type + "\"; tessera's " + std::string(family) +
                      " reads model_type \"" + std::string(model_type) + "\"");
}

HfConfigJson HfConfigJson::nested(const char* key, std::string_view model_type, std::string_view family) const {
  if (!j_.contains(key)) throw FormatError(where_ + ": missing key \"" + std::string(key) + "\"");
  return HfConfigJson(j_.at(key), where_ + ": " + key, model_type, family);
}

FormatError HfConfigJson::wrong(std::string_view key, std::string_view wanted, const nlohmann::json& v) const {
  return FormatError(where_ + ": \"" + std::string(key) + "\" must be " + std::string(wanted) + ", got " +
                     json_type_phrase(v) + (v.is_null() ? "" : " " + json_excerpt(v, 80)));
}

std::int64_t HfConfigJson::integer(const char* key) const {
  if (!j_.contains(key)) throw FormatError(where_ + ": missing key \"" + std::string(key) + "\"");
  const auto& v = j_.at(key);
  if (!v.is_number_integer()) throw wrong(key, "an integer", v);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    throw wrong(key, "an integer below 2^63", v);
  return v.get<std::int64_t>();
}

double HfConfigJson::number_or(const char* key, double fallback) const {
  if (!present(key)) return fallback;
  if (!j_.at(key).is_number()) throw wrong(key, "a number", j_.at(key));
  return j_.at(key).get<double>();
}

bool HfConfigJson::boolean_or(const char* key, bool fallback) const {
  if (!j_.contains(key)) return fallback;
  if (!j_.at(key).is_boolean()) throw wrong(key, "a boolean (true or false)", j_.at(key));
  return j_.at(key).get<bool>();
}

std::string HfConfigJson::string_or(const char* key, std::string fallback) const {
  if (!j_.contains(key)) return fallback;
  if (!j_.at(key).is_string()) throw wrong(key, "a string", j_.at(key));
  return j_.at(key).get<std::string>();
}

void write_config_json(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text << "\n";
  out.close();  // a full disk shows only when the buffer is written
  if (!out) throw Error(path.string() + ": could not write config.json: " + std::strerror(errno));
}

}  // namespace tessera::io
