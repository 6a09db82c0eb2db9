#pragma once
// defines: ByteLevelBpe, the byte-level BPE tokenizer of GPT-2, OPT and RoBERTa, as Hugging Face tokenizers runs it
// (model type BPE behind a ByteLevel pre-tokenizer and decoder): added tokens split out first (text/added_tokens.hpp),
// then each stretch of text cut by GPT-2's regex (text/gpt2_split.hpp), each piece's bytes merged pair by pair in
// the merges' rank order, lowest first and leftmost first among equals, as tokenizers' BPE does.
//
// The vocabulary is held by byte strings: tokenizer.json writes byte b as the character U+0100+k or b itself
// (GPT-2's bytes_to_unicode), "Ġthe" is the bytes " the".
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tessera/text/added_tokens.hpp"
#include "tessera/text/chunks.hpp"

namespace tessera::text {

class ByteLevelBpe {
 public:
  // tokenizer.json's text (read from `path`, named in messages). Reads model (type BPE; vocab; merges as "a b"
  // strings or [a, b] pairs; unk_token, fuse_unk, ignore_merges; no dropout, byte_fallback, subword prefix or
  // suffix), added_tokens, the ByteLevel pre_tokenizer (add_prefix_space, use_regex) and decoder; normalizer must be
  // null. post_processor, truncation and padding are not read: encode adds no special tokens and cuts nothing.
  // Added tokens take their ids as tokenizers gives them (and as a file tokenizers wrote lists them): a token the
  // vocabulary has keeps its id there, each other one the next id after the vocabulary and the tokens before it.
  // FormatError "PATH: what is wrong; what to do" otherwise.
  static ByteLevelBpe from_tokenizer_json(std::string_view json_text, const std::filesystem::path& path);

  // vocab.json ({"token": id}) and merges.txt ("#version" lines skipped, then one "a b" per line, rank by
  // order), as transformers' GPT2Tokenizer builds them: `added` (the tokens its config files name, special, and
  // added_tokens_decoder's) are split out of the text, with ids given as for tokenizer.json's added tokens.
  static ByteLevelBpe from_vocab_merges(std::string_view vocab_json, const std::filesystem::path& vocab_path,
                                        std::string_view merges_txt, const std::filesystem::path& merges_path,
                                        std::vector<AddedToken> added, bool add_prefix_space);

  // The ids of `text`, which must be valid UTF-8 (FormatError naming the first invalid byte otherwise: tokenizers
  // takes Python str only). A stretch between added tokens longer than chunk_bytes is pre-tokenized and merged in
  // chunks (text/chunks.hpp: each cut starts a piece of GPT-2's regex), with the same ids; without use_regex it is
  // one word, encoded whole.
  std::vector<std::int64_t> encode(std::string_view text, std::size_t chunk_bytes = kChunkBytes) const;
  // The bytes of the tokens, special added tokens left out, with each invalid UTF-8 sequence replaced by U+FFFD
  // (tokenizers' decode, skip_special_tokens=True). FormatError for an id that names no token.
  std::string decode(std::span<const std::int64_t> ids) const;

  // An added token's content, or a vocabulary entry as tokenizer.json spells it ("Ġthe").
  std::optional<std::int64_t> token_id(std::string_view token) const;
  // One more than the largest id.
  std::int64_t vocab_size() const { return vocab_size_; }
  const AddedTokens& added_tokens() const { return added_; }

 private:
  struct Merge {
    std::uint32_t rank;
    std::int64_t id;
  };
  ByteLevelBpe() = default;
  void build(const std::filesystem::path& path, std::unordered_map<std::string, std::int64_t> vocab,
             const std::vector<std::pair<std::string, std::string>>& merges, const std::filesystem::path& merges_path);
  void add_tokens(std::vector<AddedToken> tokens, const std::filesystem::path& path);
  void encode_word(std::string_view word, std::vector<std::int64_t>& out) const;
  void encode_stretch(std::string_view stretch, std::size_t chunk_bytes, std::vector<std::int64_t>& out) const;
  std::string token_name(std::int64_t id) const;  // as the file spells it, for messages (a slow search)

  std::unordered_map<std::string, std::int64_t> by_name_;   // tokenizer.json's spelling -> id
  std::unordered_map<std::string, std::int64_t> by_bytes_;  // the token's bytes -> id (byte-level tokens only)
  std::unordered_map<std::uint64_t, Merge> merges_;          // (left id << 32 | right id) -> rank, merged id
  std::array<std::int64_t, 256> byte_id_{};                  // the id of each single byte, -1 if none
  // What decode writes for each id (a map: nothing bounds ids but their type, and a file may leave gaps).
  std::unordered_map<std::int64_t, std::string> id_bytes_;
  std::unordered_set<std::int64_t> special_ids_;  // special added tokens, which decode leaves out
  std::int64_t vocab_size_ = 0;
  AddedTokens added_;
  std::optional<std::int64_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  bool add_prefix_space_ = false;
  bool use_regex_ = true;
  std::filesystem::path path_;
};

}  // namespace tessera::text
