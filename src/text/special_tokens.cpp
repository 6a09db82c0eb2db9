// implements: text/special_tokens.hpp.
#include "tessera/text/special_tokens.hpp"

#include <charconv>
#include <system_error>

#include "tessera/io/json_file.hpp"
#include "text_files.hpp"

namespace tessera::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kHint =
    "a special token is a string or an object {\"content\": \"...\", \"lstrip\": false, ...}; fix the file or remove it";

[[noreturn]] void bad(const fs::path& file, const std::string& key, const std::string& what) {
  detail::fail(file, key + ": " + what, kHint);
}

bool flag(const fs::path& file, const std::string& key, const json& object, const char* name, bool fallback) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) bad(file, key + "." + name, "must be true or false, got " + io::json_excerpt(*it));
  return it->get<bool>();
}

// A token as transformers writes one: "content", or {"content": ..., "lstrip": ..., ...} (with or without
// "__type": "AddedToken"). Named special tokens are special unless the object says otherwise.
std::optional<AddedToken> token_of(const fs::path& file, const std::string& key, const json& value) {
  if (value.is_null()) return std::nullopt;
  AddedToken token;
  token.id = -1;  // unknown here: the tokenizer's vocabulary gives it
  token.special = true;
  token.normalized = false;
  if (value.is_string()) {
    token.content = value.get<std::string>();
    return token;
  }
  if (!value.is_object()) bad(file, key, "must be a string, an object or null, got " + io::json_excerpt(value));
  const auto content = value.find("content");
  if (content == value.end() || !content->is_string())
    bad(file, key, "has no string \"content\": " + io::json_excerpt(value));
  token.content = content->get<std::string>();
  token.special = flag(file, key, value, "special", true);
  token.single_word = flag(file, key, value, "single_word", false);
  token.lstrip = flag(file, key, value, "lstrip", false);
  token.rstrip = flag(file, key, value, "rstrip", false);
  token.normalized = flag(file, key, value, "normalized", !token.special);
  return token;
}

void take_named(const fs::path& file, const json& root, SpecialTokenFiles& out) {
  const std::pair<const char*, std::optional<AddedToken>*> named[] = {
      {"bos_token", &out.bos}, {"eos_token", &out.eos}, {"unk_token", &out.unk}, {"pad_token", &out.pad}};
  for (const auto& [key, slot] : named)
    if (const auto it = root.find(key); it != root.end()) *slot = token_of(file, key, *it);
  for (const char* key : {"sep_token", "cls_token", "mask_token"})
    if (const auto it = root.find(key); it != root.end())
      if (auto token = token_of(file, key, *it)) out.other_special.push_back(std::move(*token));
  for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
    const auto it = root.find(key);
    if (it == root.end() || it->is_null()) continue;
    // extra_special_tokens may also be an object {"name": token} (model-specific named tokens).
    if (!it->is_array() && !it->is_object()) bad(file, key, "must be a list of tokens, got " + io::json_excerpt(*it));
    for (const auto& item : *it)
      if (auto token = token_of(file, key, item)) out.other_special.push_back(std::move(*token));
  }
}

json read_object(const fs::path& file, SpecialTokenFiles& out) {
  std::string bytes = detail::read_file_bytes(file, kHint);
  json root = detail::parse_json(file, bytes, kHint);
  if (!root.is_object()) detail::fail(file, "is not a JSON object, got " + io::json_type_phrase(root), kHint);
  out.files.emplace_back(file, std::move(bytes));
  return root;
}

}  // namespace

SpecialTokenFiles read_special_token_files(const fs::path& dir) {
  SpecialTokenFiles out;
  const fs::path config_file = dir / "tokenizer_config.json", map_file = dir / "special_tokens_map.json";
  std::error_code ec;
  bool has_decoder = false;
  if (fs::exists(config_file, ec)) {
    const json config = read_object(config_file, out);
    take_named(config_file, config, out);
    const auto flag = [&](const char* key, std::optional<bool>& into) {
      if (const auto it = config.find(key); it != config.end() && !it->is_null()) {
        if (!it->is_boolean()) bad(config_file, key, "must be true or false, got " + io::json_excerpt(*it));
        into = it->get<bool>();
      }
    };
    flag("add_prefix_space", out.add_prefix_space);
    flag("add_bos_token", out.add_bos_token);
    flag("add_eos_token", out.add_eos_token);
    if (const auto it = config.find("tokenizer_class"); it != config.end() && !it->is_null()) {
      if (!it->is_string())
        bad(config_file, "tokenizer_class", "must be a class name (a string), got " + io::json_excerpt(*it));
      out.tokenizer_class = it->get<std::string>();
    }
    if (const auto it = config.find("added_tokens_decoder"); it != config.end() && !it->is_null()) {
      if (!it->is_object())
        bad(config_file, "added_tokens_decoder", "must be an object {\"id\": token}, got " + io::json_excerpt(*it));
      has_decoder = true;
      for (const auto& [key, value] : it->items()) {
        std::int64_t id = -1;
        const auto [end, err] = std::from_chars(key.data(), key.data() + key.size(), id);
        if (err != std::errc{} || end != key.data() + key.size() || id < 0)
          bad(config_file, "added_tokens_decoder", "key " + detail::quoted(key) + " is not a token id");
        auto token = token_of(config_file, "added_tokens_decoder." + key, value);
        if (!token) bad(config_file, "added_tokens_decoder." + key, "is null; give the token or remove the entry");
        token->id = id;
        out.added_tokens_decoder.push_back(std::move(*token));
      }
    }
  }
  // transformers 5 reads special_tokens_map.json only for a tokenizer_config.json without added_tokens_decoder
  // (older saves), and then lets its entries override the config's.
  if (!has_decoder && fs::exists(map_file, ec)) {
    const json map = read_object(map_file, out);
    take_named(map_file, map, out);  // a key it has replaces the config's
  }
  return out;
}

}  // namespace tessera::text
