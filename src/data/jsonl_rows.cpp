// implements: jsonl_data_file and read_token_ids (data/jsonl_rows.hpp).
#include "tessera/data/jsonl_rows.hpp"

#include <algorithm>
#include <limits>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera::data::detail {
namespace fs = std::filesystem;

fs::path jsonl_data_file(const std::string& data, const JsonlData& kind) {
  const fs::path path(data);
  const std::string file(kind.file), shape(kind.line_shape);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path found = path / file;
    if (!fs::exists(found, ec))
      throw ConfigError("data=" + data + ": no " + file + " in it; the data of " + std::string(kind.readers) + " is " +
                        found.string() + ", " + std::string(kind.rows) + " (" + shape + ")");
    return found;
  }
  if (!fs::exists(path, ec))
    throw ConfigError("data=" + data + ": no such file or directory; give a directory with " + file + " in it, or the " +
                      file + " file itself");
  if (path.extension() != ".jsonl")
    throw ConfigError("data=" + data + ": " + std::string(kind.readers) + " read " + file + " (" + shape +
                      "), not this file; token files are for the causal language models");
  return path;
}

std::vector<std::int64_t> read_token_ids(const nlohmann::json& j, const char* key, const std::string& where,
                                         const TokenIdRules& r) {
  const std::string shape(r.line_shape);
  if (!j.contains(key)) throw ConfigError(where + ": no \"" + key + "\"; " + shape);
  const nlohmann::json& v = j.at(key);
  if (!v.is_array())
    throw ConfigError(where + ": \"" + key + "\" must be an array of token ids, got " + io::json_type_phrase(v) + " " +
                      io::json_excerpt(v, 40) + "; " + shape);
  if (v.empty()) throw ConfigError(where + ": \"" + key + "\" is empty; " + std::string(r.empty_fix));
  if (static_cast<std::int64_t>(v.size()) > r.seq_len)
    throw ConfigError(where + ": \"" + key + "\" has " + std::to_string(v.size()) + " tokens, more than seq_len=" +
                      std::to_string(r.seq_len) + "; raise seq_len or shorten the row");
  const std::string last = std::to_string(r.vocab_size - 1);
  std::vector<std::int64_t> ids;
  ids.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const nlohmann::json& e = v[i];
    const std::string at = where + ": \"" + key + "\"[" + std::to_string(i) + "] ";
    if (!e.is_number_integer()) throw ConfigError(at + "must be an integer token id, got " + io::json_excerpt(e, 40));
    // An unsigned value beyond int64 is out of range whatever the vocabulary: keep it from wrapping.
    const bool huge = e.is_number_unsigned() && e.get<std::uint64_t>() > static_cast<std::uint64_t>(
                                                                            std::numeric_limits<std::int64_t>::max());
    const std::int64_t id = huge ? std::numeric_limits<std::int64_t>::max() : e.get<std::int64_t>();
    if (r.labels && id == models::kIgnoreIndex) {
      ids.push_back(id);
      continue;
    }
    if (huge || id < 0 || id >= r.vocab_size)
      throw ConfigError(at + "is " + io::json_excerpt(e, 40) + ", " +
                        (r.labels ? "neither a token id of the model (0 to " + last + ") nor -100 (ignored by the loss)"
                                  : "not a token id of the model (0 to " + last + ")") +
                        "; tokenize with the model's own tokenizer");
    if (id == r.reserved_id)
      throw ConfigError(at + "is " + std::to_string(id) + ", " + std::string(r.reserved_why));
    ids.push_back(id);
  }
  if (r.labels && std::all_of(ids.begin(), ids.end(), [](std::int64_t id) { return id == models::kIgnoreIndex; }))
    throw ConfigError(where + ": \"labels\" are all -100 (ignored by the loss), so the row trains nothing; " +
                      std::string(r.all_ignored_fix));
  return ids;
}

}  // namespace tessera::data::detail
