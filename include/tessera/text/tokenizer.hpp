#pragma once
// defines: Tokenizer, the one way tessera turns the labs' text into token ids: a SentencePiece model
// (text/sentencepiece.hpp: Llama, OpenLLaMA, Code Llama, T5 / Flan-T5) or a byte-level BPE (text/byte_level_bpe.hpp:
// OPT, GPT-2), loaded from a model directory or one of its files, with ids equal to the Python packages' (python
// sentencepiece's encode(text); tokenizers' encode(text, add_special_tokens=False).ids). docs/tokenizers.md.
//
// A value type: copies share one immutable model, and every member is safe to call from several threads at once.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/text/chunks.hpp"

namespace tessera::text {

class Tokenizer {
 public:
  // `path` is a model directory or a file in one:
  //   directory        its tokenizer.json when that is a byte-level BPE; else its tokenizer.model (T5's spiece.model
  //                    without one); else its vocab.json + merges.txt; else its tokenizer.json's reason for refusal.
  //                    (A Llama or T5 directory has both tokenizer.json and the .model: the .model is the original.)
  //   *.model          a SentencePiece model
  //   vocab.json, merges.txt   the pair (the other one beside it)
  //   any other *.json a tokenizer.json
  // BOS, EOS and PAD are the tokens tokenizer_config.json / special_tokens_map.json beside it name, when present
  // (text/special_tokens.hpp); else a SentencePiece model's own, and none for a byte-level BPE (whose files have no
  // such notion: transformers says None too). FormatError "PATH: what is wrong; what to do" for a missing or
  // damaged file, ConfigError for a path that is no directory, regular file or tokenizer file name.
  static Tokenizer load(const std::filesystem::path& path);

  // The ids of `text`, no special token added; special-token strings inside it ("</s>") are split out as their ids
  // by a byte-level BPE, as tokenizers does, and are plain text to SentencePiece, as sentencepiece does.
  // Invalid UTF-8: SentencePiece encodes each invalid byte as U+FFFD (as python sentencepiece does for bytes); a
  // byte-level BPE throws FormatError naming the byte (tokenizers takes valid Unicode only).
  // A text longer than chunk_bytes is encoded in chunks, with the same ids (text/chunks.hpp; the models say when
  // they cannot: SentencePiece::why_unchunked).
  std::vector<std::int64_t> encode(std::string_view text, std::size_t chunk_bytes = kChunkBytes) const;
  // encode(text) with the special tokens transformers' tokenizer(text) adds: BOS first when add_bos_token(), EOS
  // last when add_eos_token(). ([1, ...] for Llama, [2, ...] for OPT, [..., 1] for T5.)
  std::vector<std::int64_t> encode_with_special(std::string_view text) const;
  // The text of `ids`, special tokens left out (tokenizers' decode default; SentencePiece's control pieces).
  // FormatError for an id that names no token.
  std::string decode(std::span<const std::int64_t> ids) const;

  // One more than the largest id (SentencePiece: the number of pieces).
  std::int64_t vocab_size() const;
  std::optional<std::int64_t> bos_id() const;
  std::optional<std::int64_t> eos_id() const;
  std::optional<std::int64_t> pad_id() const;
  // Whether BOS / EOS wrap a text: tokenizer_config.json's add_bos_token / add_eos_token; without the key, the
  // default of its tokenizer_class as transformers and litgpt decide it (Llama and Code Llama tokenizers add BOS, T5's
  // add EOS, others neither); without the file, neither. Load refuses a true one whose token the tokenizer lacks.
  bool add_bos_token() const;
  bool add_eos_token() const;
  // The id of a token as the tokenizer's files spell it ("</s>", "Ġthe", "▁the"), nullopt if it has none.
  std::optional<std::int64_t> token_id(std::string_view piece) const;

  // "sentencepiece" or "byte-level-bpe".
  std::string_view kind() const;
  // kind() + ":" + the FNV-1a 64-bit hash (16 hex digits) of the files it is built from, names and bytes, in order
  // (the tokenizer file or files, then tokenizer_config.json and special_tokens_map.json when read): the name of
  // this tokenizer in token caches. Equal files give equal fingerprints, whichever path named them.
  const std::string& fingerprint() const;
  // The main file read: tokenizer.json, tokenizer.model or vocab.json.
  const std::filesystem::path& source() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tessera::text
