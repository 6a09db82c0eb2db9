// tokenize_dump: text through tessera::text::Tokenizer, for tests/reference/check_tokenizers.py to compare with the
// Python packages.
//   tokenize_dump [--chunk-bytes N] TOKENIZER IN.jsonl OUT.jsonl
// --chunk-bytes: encode texts longer than N bytes in chunks of about N (text/chunks.hpp; default 1 MiB).
// IN.jsonl holds one object per line: {"text": "..."}, or {"hex": "..."} for raw bytes (invalid UTF-8).
// OUT.jsonl gets first {"kind", "vocab_size", "bos_id", "eos_id", "pad_id", "fingerprint"} (ids null when unset),
// then per input line {"ids": [...], "decoded": decode(ids)}, or {"error": "..."} when encode refused the text.
// Exit 2 on bad arguments, 1 with the message when the tokenizer or a file cannot be read.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/text/tokenizer.hpp"

namespace {

nlohmann::json id_or_null(const std::optional<std::int64_t>& id) { return id ? nlohmann::json(*id) : nlohmann::json(); }

std::string from_hex(const std::string& where, const std::string& hex) {
  if (hex.size() % 2 != 0) throw tessera::FormatError(where + ": \"hex\" has an odd number of digits");
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t chunk_bytes = tessera::text::kChunkBytes;
  const char* program = argv[0];
  if (argc == 6 && std::string(argv[1]) == "--chunk-bytes") {
    const char* number = argv[2];
    char* end = nullptr;
    chunk_bytes = std::strtoull(number, &end, 10);
    argc = end != number && *end == '\0' ? 4 : 0;
    argv += 2;
  }
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s [--chunk-bytes N] TOKENIZER IN.jsonl OUT.jsonl\n", program);
    return 2;
  }
  try {
    const auto tokenizer = tessera::text::Tokenizer::load(argv[1]);
    std::ofstream out(argv[3]);
    const auto write = [&](const nlohmann::json& row) {
      out << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    };
    write({{"kind", tokenizer.kind()},
           {"vocab_size", tokenizer.vocab_size()},
           {"bos_id", id_or_null(tokenizer.bos_id())},
           {"eos_id", id_or_null(tokenizer.eos_id())},
           {"pad_id", id_or_null(tokenizer.pad_id())},
           {"fingerprint", tokenizer.fingerprint()}});
    tessera::io::for_each_json_line(argv[2], "{\"text\": \"...\"} or {\"hex\": \"...\"}",
                                    [&](const std::string& where, const nlohmann::json& row) {
                                      const std::string text = row.contains("hex")
                                                                   ? from_hex(where, row.at("hex").get<std::string>())
                                                                   : row.at("text").get<std::string>();
                                      try {
                                        const auto ids = tokenizer.encode(text, chunk_bytes);
                                        write({{"ids", ids}, {"decoded", tokenizer.decode(ids)}});
                                      } catch (const tessera::FormatError& e) {
                                        write({{"error", e.what()}});
                                      }
                                    });
    if (!out.flush()) throw tessera::Error(std::string(argv[3]) + ": cannot write");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenize_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
