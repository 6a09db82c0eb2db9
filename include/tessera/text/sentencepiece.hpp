#pragma once
// defines: SentencePiece, a SentencePiece model (tokenizer.model of Llama, OpenLLaMA, Code Llama, T5 / Flan-T5) run by
// libsentencepiece (Debian's libsentencepiece-dev), which encodes as python sentencepiece's
// SentencePieceProcessor.encode(text) does: the model's normalization, no BOS or EOS added, no sampling.
// The library stays out of this header: tessera's users need its shared library only.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/text/chunks.hpp"

namespace tessera::text {

class SentencePiece {
 public:
  // The serialized model: tokenizer.model's bytes, read from `path` (named in messages). FormatError
  // "PATH: is not a SentencePiece model (the library's reason); ..." for bytes that do not parse; Error when the
  // program loaded libsentencepiece after LibTorch, whose global variables then clash (cmake/TesseraDependencies.cmake).
  static SentencePiece from_model_bytes(std::string_view bytes, const std::filesystem::path& path);

  // Text that is not valid UTF-8 is encoded as sentencepiece encodes it: each invalid byte as U+FFFD (which a
  // byte_fallback model writes as the bytes EF BF BD, another as its unknown piece). A text longer than chunk_bytes
  // is encoded in chunks (text/chunks.hpp) with the same ids, unless why_unchunked() says why not.
  std::vector<std::int64_t> encode(std::string_view text, std::size_t chunk_bytes = kChunkBytes) const;
  // Control pieces (<s>, </s>, <pad>) decode to nothing, the unknown piece to " ⁇ ", byte pieces to their bytes.
  // FormatError for an id outside 0..vocab_size()-1.
  std::string decode(std::span<const std::int64_t> ids) const;

  // The id of the piece spelled `piece` ("▁the", "<s>"), nullopt when the model has no such piece.
  std::optional<std::int64_t> token_id(std::string_view piece) const;
  std::int64_t vocab_size() const;
  // The model's own special ids (its trainer's bos_id, eos_id, pad_id, unk_id), nullopt where it has none (-1).
  std::optional<std::int64_t> bos_id() const;
  std::optional<std::int64_t> eos_id() const;
  std::optional<std::int64_t> pad_id() const;
  std::optional<std::int64_t> unk_id() const;
  // "" when encode cuts long texts into chunks; else why this model encodes every text whole ("a unigram model,
  // ...": docs/tokenizers.md#long-texts).
  const std::string& why_unchunked() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  std::filesystem::path path_;
};

}  // namespace tessera::text
