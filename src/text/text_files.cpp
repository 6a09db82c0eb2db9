// implements: src/text/text_files.hpp.
#include "text_files.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/io/input_file.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/text/utf8.hpp"

namespace tessera::text::detail {

void fail(const std::filesystem::path& path, const std::string& what, std::string_view hint) {
  throw FormatError(path.string() + ": " + what + (hint.empty() ? "" : "; " + std::string(hint)));
}

std::string read_file_bytes(const std::filesystem::path& path, std::string_view hint) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) fail(path, std::string("cannot open: ") + std::strerror(errno), hint);
  if (S_ISDIR(status.st_mode)) fail(path, "is a directory, not a file", hint);
  // A FIFO or device would block or never end: refused before it is opened.
  if (!S_ISREG(status.st_mode)) fail(path, "is not a regular file (a FIFO, socket or device)", hint);
  if (static_cast<std::size_t>(status.st_size) > kMaxTokenizerFileBytes)
    fail(path, "is " + std::to_string(status.st_size) + " bytes; a tokenizer file may be at most " +
                   std::to_string(kMaxTokenizerFileBytes) + " bytes",
         hint);
  io::InputFile in(path);  // checked again on the descriptor: a FIFO put in its place since does not block
  if (!in.is_open()) fail(path, in.problem(), hint);
  std::string bytes(static_cast<std::size_t>(status.st_size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (in.gcount() != static_cast<std::streamsize>(bytes.size()))
    fail(path, "changed size while read (" + std::to_string(in.gcount()) + " of " + std::to_string(bytes.size()) +
                   " bytes)",
         hint);
  return bytes;
}

nlohmann::json parse_json(const std::filesystem::path& path, std::string_view text, std::string_view hint) {
  if (const auto too_deep = io::json_nesting_error(text)) fail(path, "is not accepted: its JSON " + *too_deep, hint);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("is not valid JSON (") + e.what() + ")", hint);
  }
}

std::string quoted(std::string_view text) {
  constexpr std::size_t kMaxChars = 60;
  const std::string valid = lossy_utf8(text);
  std::size_t end = 0, chars = 0;
  while (end < valid.size() && chars < kMaxChars) {
    end += decode_utf8(valid, end).length;
    ++chars;
  }
  std::string out = nlohmann::json(valid.substr(0, end)).dump(-1, ' ', true);
  if (end < valid.size()) out.insert(out.size() - 1, "...");
  return out;
}

}  // namespace tessera::text::detail
