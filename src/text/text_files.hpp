#pragma once
// defines (private to src/text/): reading a tokenizer's files whole, once (their bytes also feed the fingerprint),
// and parsing JSON from those bytes, with FormatError messages "PATH: what is wrong; hint".
#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera::text::detail {

// Larger than any tokenizer file published (a 256k-token tokenizer.json is about 35 MB).
inline constexpr std::size_t kMaxTokenizerFileBytes = 256u << 20;

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, std::string_view hint);

// The bytes of `path`, which must be a regular file of at most kMaxTokenizerFileBytes.
std::string read_file_bytes(const std::filesystem::path& path, std::string_view hint);

// `text` (the bytes of `path`) as JSON, nested at most io::kMaxJsonDepth deep.
nlohmann::json parse_json(const std::filesystem::path& path, std::string_view text, std::string_view hint);

// A short, printable form of a token or text for messages: JSON-quoted, at most 60 characters.
std::string quoted(std::string_view text);

}  // namespace tessera::text::detail
