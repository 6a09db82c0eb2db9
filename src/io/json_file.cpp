// implements: io/json_file.hpp.
#include "tessera/io/json_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "tessera/core/error.hpp"
#include "tessera/io/input_file.hpp"

namespace tessera::io {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, std::string_view hint) {
  throw FormatError(path.string() + ": " + what + (hint.empty() ? "" : "; " + std::string(hint)));
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::optional<std::string> json_nesting_error(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return "nests deeper than " + std::to_string(max_depth) + " levels (at byte " + std::to_string(i) + ")";
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view hint) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) fail(path, std::string("cannot open: ") + std::strerror(errno), hint);
  if (!S_ISREG(status.st_mode))
    fail(path, S_ISDIR(status.st_mode) ? "is a directory, not a JSON file" : "is not a regular file (a FIFO, socket or device)",
         hint);
  if (static_cast<std::size_t>(status.st_size) > kMaxJsonFileBytes)
    fail(path, "is " + std::to_string(status.st_size) + " bytes; a JSON file here may be at most " +
                   std::to_string(kMaxJsonFileBytes) + " bytes",
         hint);
  // O_NONBLOCK: should the path be swapped for a FIFO after the check, open() still returns at once.
  const Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno), hint);
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(file.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, std::string("cannot read: ") + std::strerror(errno), hint);
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxJsonFileBytes) fail(path, "grew past " + std::to_string(kMaxJsonFileBytes) + " bytes while read", hint);
  }
  if (const auto too_deep = json_nesting_error(text)) fail(path, "is not accepted: its JSON " + *too_deep, hint);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("is not valid JSON (") + e.what() + ")", hint);
  }
}

std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars) {
  const std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  return text.size() <= max_chars ? text : text.substr(0, max_chars) + "...";
}

std::string json_type_phrase(const nlohmann::json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return value.type_name();
}

void for_each_json_line(const std::filesystem::path& file, std::string_view line_shape,
                        const std::function<void(const std::string& where, const nlohmann::json& object)>& row) {
  InputFile in(file);  // a FIFO or device refused, without blocking
  if (!in.is_open()) throw ConfigError(file.string() + ": " + in.problem() + "; " + std::string(line_shape));
  std::string line;
  std::int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file.string() + ":" + std::to_string(n);
    if (auto deep = json_nesting_error(line)) throw ConfigError(where + ": " + *deep);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) throw ConfigError(where + ": not a JSON object; " + std::string(line_shape));
    row(where, j);
  }
  if (in.bad()) throw ConfigError(file.string() + ": read error after line " + std::to_string(n));
}

void for_each_json_array_object(const std::filesystem::path& file, std::string_view element_shape,
                                const std::function<void(const std::string& where, const nlohmann::json& object)>& row) {
  InputFile in(file);
  if (!in.is_open()) throw ConfigError(file.string() + ": " + in.problem() + "; " + std::string(element_shape));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ConfigError(file.string() + ": read error");
  std::int64_t line = 1;
  std::size_t i = 0;
  const auto where_at = [&](std::int64_t l) { return file.string() + ":" + std::to_string(l); };
  const auto skip_space = [&] {
    for (; i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'); ++i)
      if (text[i] == '\n') ++line;
  };
  skip_space();
  if (i >= text.size() || text[i] != '[')
    throw ConfigError(where_at(line) + ": not a JSON array; the file is one array of objects, " +
                      std::string(element_shape));
  ++i;
  skip_space();
  if (i < text.size() && text[i] == ']') {
    ++i;
  } else {
    for (std::int64_t index = 0;; ++index) {
      // One element: up to the ',' or ']' at depth 0 outside strings.
      const std::size_t start = i;
      const std::int64_t start_line = line;
      std::int64_t depth = 0;
      bool in_string = false, escaped = false;
      for (; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n') ++line;
        if (in_string) {
          if (escaped) escaped = false;
          else if (c == '\\') escaped = true;
          else if (c == '"') in_string = false;
          continue;
        }
        if (c == '"') in_string = true;
        else if (c == '{' || c == '[') ++depth;
        else if (c == '}' || c == ']') {
          if (depth == 0) break;
          --depth;
        } else if (c == ',' && depth == 0) break;
      }
      const std::string where = where_at(start_line);
      if (i >= text.size())
        throw ConfigError(where + ": element " + std::to_string(index) + " does not end: the array is cut short; " +
                          std::string(element_shape));
      const std::string_view element(text.data() + start, i - start);
      if (auto deep = json_nesting_error(element)) throw ConfigError(where + ": " + *deep);
      const nlohmann::json j = nlohmann::json::parse(element, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object())
        throw ConfigError(where + ": element " + std::to_string(index) + " is not a JSON object; " +
                          std::string(element_shape));
      row(where, j);
      const char end = text[i++];
      if (end == ']') break;
      skip_space();
    }
  }
  skip_space();
  if (i != text.size()) throw ConfigError(where_at(line) + ": text after the array; the file is one array of objects");
}

}  // namespace tessera::io
