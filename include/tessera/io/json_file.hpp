#pragma once
// defines: read_json_file, the one way tessera reads a JSON file (config.json, adapter_config.json, a shard
// index), for_each_json_line, the one way it reads a JSON Lines data file (labels.jsonl, pairs.jsonl), and the
// two guards every JSON text passes: json_nesting_error (nesting bounded before a value is built: deeper values
// overflow the stack of anything that walks them recursively, dump() first) and json_excerpt (a value in a
// message, cut to a bounded length).
#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::io {

// Deeper than any Hugging Face or PEFT file nests (config.json's rope_scaling is at depth 2).
inline constexpr std::size_t kMaxJsonDepth = 64;
// Larger than any config or index file (a 405B model's index is about 100 KiB).
inline constexpr std::size_t kMaxJsonFileBytes = 64u << 20;

// Nullopt when no array or object in `text` nests deeper than `max_depth`; otherwise the message
// "nests deeper than N levels (at byte K)". Strings are skipped, so brackets inside them do not count.
std::optional<std::string> json_nesting_error(std::string_view text, std::size_t max_depth = kMaxJsonDepth);

// Reads and parses `path`, which must be a regular file (a FIFO or directory is refused before it is
// opened, so nothing blocks) of at most kMaxJsonFileBytes, nested at most kMaxJsonDepth deep. Throws
// FormatError "PATH: what is wrong; <hint>", where hint says what the file is for.
nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view hint);

// `value` as compact ASCII JSON, cut to max_chars with "..." appended when longer.
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 200);

// Calls row(where, object) for each non-blank line of the JSON Lines file `file`, in order, where = "FILE:LINE".
// ConfigError (the file is data a setting named) "FILE:LINE: not a JSON object; <line_shape>" for a line that is
// not one, the nesting error for one nested too deep, and "FILE: cannot read it" / a read error.
void for_each_json_line(const std::filesystem::path& file, std::string_view line_shape,
                        const std::function<void(const std::string& where, const nlohmann::json& object)>& row);

// Calls row(where, object) for each element of the JSON file `file` whose top level is one array of objects (an
// Alpaca-style data file), in order, where = "FILE:LINE" of the element's first character. ConfigError naming the
// file and the line for a file that is no array, an element that is no object or is not valid JSON, and for text
// after the array. Data files may be large: the file is read whole, elements parsed one at a time.
void for_each_json_array_object(const std::filesystem::path& file, std::string_view element_shape,
                                const std::function<void(const std::string& where, const nlohmann::json& object)>& row);

// "a boolean", "a number", "null", ...: the JSON type of `value`, for "must be X, got Y" messages.
std::string json_type_phrase(const nlohmann::json& value);

}  // namespace tessera::io
