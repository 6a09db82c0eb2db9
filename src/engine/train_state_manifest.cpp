// implements: train_state::check_manifest (engine/train_state.hpp): every field of a checkpoint's manifest.json
// checked for its type and range before any of it is used.
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "tessera/core/crc32c.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/train_state.hpp"
#include "tessera/io/json_file.hpp"

namespace tessera::train_state {
namespace {

using nlohmann::json;
constexpr const char* kFormat = format_name;
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

// Reads fields of one manifest, each named in its message by its path ("optimizer.steps").
class Fields {
 public:
  explicit Fields(const std::filesystem::path& where) : where_(where) {}

  [[noreturn]] void bad(const std::string& field, const std::string& what) const {
    throw FormatError(where_.string() + ": \"" + field + "\" " + what +
                      "; this checkpoint is damaged: resume from an older one (resume=checkpoint_dir/step-N)");
  }
  // "got a string \"yes\"", "is missing".
  static std::string seen(const json* value) {
    return value ? "got " + io::json_type_phrase(*value) + " " + io::json_excerpt(*value, 80) : "is missing";
  }

  const json* find(const json& object, const char* key) const {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }
  const json& object(const json& parent, const char* key, const std::string& field) const {
    const json* value = find(parent, key);
    if (!value || !value->is_object()) bad(field, "must be an object, " + seen(value));
    return *value;
  }
  std::int64_t integer(const json& parent, const char* key, const std::string& field, std::int64_t lo,
                       std::int64_t hi, const std::string& range) const {
    const json* value = find(parent, key);
    const bool whole = value && value->is_number_integer();
    const bool fits = whole && (!value->is_number_unsigned() || value->get<std::uint64_t>() <= std::uint64_t(kMaxInt));
    if (!fits || value->get<std::int64_t>() < lo || value->get<std::int64_t>() > hi)
      bad(field, "must be a whole number " + range + ", " + seen(value));
    return value->get<std::int64_t>();
  }
  const std::string& string(const json& parent, const char* key, const std::string& field) const {
    const json* value = find(parent, key);
    if (!value || !value->is_string()) bad(field, "must be a string, " + seen(value));
    return value->get_ref<const std::string&>();
  }

 private:
  const std::filesystem::path& where_;
};

}  // namespace

std::int64_t check_manifest(const json& m, const std::filesystem::path& where) {
  const Fields f(where);
  if (!m.is_object())
    throw FormatError(where.string() + ": must be a JSON object, got " + io::json_type_phrase(m) +
                      "; this checkpoint is damaged: resume from an older one (resume=checkpoint_dir/step-N)");
  const json* format = f.find(m, "format");
  if (!format || *format != kFormat) f.bad("format", "must be \"" + std::string(kFormat) + "\", " + Fields::seen(format));
  const json* version = f.find(m, "version");
  if (!version || !version->is_number_integer() || version->get<std::int64_t>() != format_version)
    throw FormatError(where.string() + ": checkpoint format version " +
                      (version ? io::json_excerpt(*version, 40) : std::string("(none)")) +
                      ", and this tessera reads version " + std::to_string(format_version) +
                      "; resume with the tessera that wrote it");
  const std::int64_t step = f.integer(m, "step", "step", 0, kMaxInt, ">= 0");
  const std::string to_step = "from 0 to the checkpoint's step, " + std::to_string(step);

  const std::int64_t world = f.integer(m, "world_size", "world_size", 1, 1 << 24, "from 1 to 16777216");
  const std::int64_t group = f.integer(m, "shard_group_size", "shard_group_size", 1, world,
                                       "from 1 to world_size (" + std::to_string(world) + ")");
  if (world % group != 0)
    f.bad("shard_group_size", "is " + std::to_string(group) + ", which does not divide world_size " +
                                  std::to_string(world));
  f.integer(m, "units", "units", 1, std::numeric_limits<std::int32_t>::max(), ">= 1");
  f.object(m, "experiment", "experiment");
  f.object(m, "settings", "settings");

  const json& optimizer = f.object(m, "optimizer", "optimizer");
  f.string(optimizer, "name", "optimizer.name");
  const json* has_state = f.find(optimizer, "has_state");
  if (!has_state || !has_state->is_boolean())
    f.bad("optimizer.has_state", "must be true or false, " + Fields::seen(has_state));
  f.integer(optimizer, "steps", "optimizer.steps", 0, step, to_step);

  const json& scaler = f.object(m, "loss_scaler", "loss_scaler");
  const json* scale = f.find(scaler, "scale");
  if (!scale || !scale->is_number() || !std::isfinite(scale->get<double>()) || scale->get<double>() <= 0)
    f.bad("loss_scaler.scale", "must be a finite number > 0, " + Fields::seen(scale));
  for (const char* key : {"good_in_a_row", "skipped", "growths"})
    f.integer(scaler, key, std::string("loss_scaler.") + key, 0, step, to_step);

  const json* files = f.find(m, "files");
  if (!files || !files->is_array() || files->empty())
    f.bad("files", "must be a non-empty array of {\"name\", \"bytes\", \"crc32c\"}, one per rank file, " +
                       Fields::seen(files));
  std::set<std::string> names;
  for (std::size_t i = 0; i < files->size(); ++i) {
    const std::string field = "files[" + std::to_string(i) + "]";
    const json& file = (*files)[i];
    if (!file.is_object()) f.bad(field, "must be an object {\"name\", \"bytes\", \"crc32c\"}, " + Fields::seen(&file));
    const std::string& name = f.string(file, "name", field + ".name");
    if (name.empty() || name.find('/') != std::string::npos || name.find('\0') != std::string::npos ||
        name.starts_with("."))
      f.bad(field + ".name", "is " + io::json_excerpt(file["name"], 80) + ", which is not a plain file name");
    if (!names.insert(name).second) f.bad(field + ".name", "lists " + name + " a second time");
    f.integer(file, "bytes", field + ".bytes", 0, kMaxInt, ">= 0");
    const json* crc = f.find(file, "crc32c");
    if (!crc || !crc->is_string() || !parse_crc32c(crc->get_ref<const std::string&>()))
      f.bad(field + ".crc32c", "must be the file's CRC-32C as 8 lowercase hex digits, " + Fields::seen(crc));
  }
  return step;
}

}  // namespace tessera::train_state
