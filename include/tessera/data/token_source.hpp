#pragma once
// defines: tessera::data::TokenSource, a read-only sequence of uint16 token ids, either
// memory-mapped from a token file (llm.c or nanoGPT format) or generated synthetically.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::data {

class TokenSource {
 public:
  // Maps `path` read-only and detects its format:
  //  - llm.c: a 1024-byte header of 256 little-endian int32 (header[0] == 20240520 magic,
  //    header[1] == version 1, header[2] == token count n), then n uint16 tokens;
  //    the file must be exactly 1024 + 2*n bytes.
  //  - otherwise nanoGPT's raw little-endian uint16 file (an even, non-zero byte count).
  // A file whose first int32 equals the magic is by definition llm.c, so a raw file whose
  // first two tokens happen to spell it (0xD888, 0x0134) is read, and refused, as llm.c.
  // Throws FormatError naming the path for a missing, empty or malformed file.
  static TokenSource open(const std::filesystem::path& path);

  // n_tokens tokens in [0, vocab_size): a seeded random successor table over the vocab, and
  // each next token = successor(prev) with probability 3/4, else uniform. Bit-identical on
  // every machine for the same arguments. Throws ConfigError for n_tokens == 0 or a
  // vocab_size outside [1, 65536].
  static TokenSource synthetic(std::size_t n_tokens, std::uint32_t vocab_size, std::uint64_t seed);

  // Tokens already in memory (text tokenized by data/text_data.hpp), described as `description`. ConfigError for
  // no tokens.
  static TokenSource from_tokens(std::vector<std::uint16_t> tokens, std::string description);

  TokenSource(TokenSource&& other) noexcept;
  TokenSource& operator=(TokenSource&& other) noexcept;
  TokenSource(const TokenSource&) = delete;
  TokenSource& operator=(const TokenSource&) = delete;
  ~TokenSource();

  std::size_t size() const { return tokens_.size(); }
  std::span<const std::uint16_t> tokens() const { return tokens_; }
  // e.g. "llm.c file data/x.bin (1,234,567 tokens)" or "synthetic (132,097 tokens, seed 42)".
  std::string_view description() const { return description_; }
  // Largest token id; scans the tokens on first call (0 for an empty, moved-from source).
  std::uint16_t max_token() const;
  // For a mapped file: FormatError when the file no longer has the size it had at open() (another
  // process truncated or rewrote it), checked before each read of it: reading a mapped page past a
  // truncated end is a SIGBUS, not an error. One fstat(); nothing for synthetic tokens.
  void ensure_unchanged() const;

 private:
  TokenSource() = default;
  void release() noexcept;

  void* map_ = nullptr;               // whole-file mapping (open), else null
  std::size_t map_bytes_ = 0;
  int fd_ = -1;                       // the mapped file, kept open to watch its size
  std::string path_;                  // as given to open(), for messages
  std::vector<std::uint16_t> owned_;  // generated tokens (synthetic)
  std::span<const std::uint16_t> tokens_;
  std::string description_;
  // -1 until computed; concurrent first calls compute the same value, so a race is benign.
  mutable std::atomic<std::int32_t> max_token_{-1};
};

}  // namespace tessera::data
