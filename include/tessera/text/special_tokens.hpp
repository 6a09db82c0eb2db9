#pragma once
// defines: SpecialTokenFiles, what the transformers-side files beside a tokenizer say about its special tokens:
// tokenizer_config.json (bos_token, eos_token, unk_token, pad_token, ..., added_tokens_decoder, add_prefix_space)
// and special_tokens_map.json, merged as transformers 5 merges them: special_tokens_map.json's entries win, unless
// tokenizer_config.json has added_tokens_decoder, in which case special_tokens_map.json is not read.
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/text/added_tokens.hpp"

namespace tessera::text {

struct SpecialTokenFiles {
  // The named tokens (a token's "content" and flags, as a string or an AddedToken object; id -1: the vocabulary
  // gives it); a key that is absent or null leaves its token unset.
  std::optional<AddedToken> bos, eos, unk, pad;
  // sep_token, cls_token, mask_token, additional_special_tokens and extra_special_tokens: special tokens too.
  std::vector<AddedToken> other_special;
  // tokenizer_config.json's added_tokens_decoder ({"id": {content, flags}}), with the ids it gives.
  std::vector<AddedToken> added_tokens_decoder;
  std::optional<bool> add_prefix_space;
  // tokenizer_config.json's add_bos_token / add_eos_token, and its tokenizer_class ("LlamaTokenizer", ...).
  std::optional<bool> add_bos_token, add_eos_token;
  std::optional<std::string> tokenizer_class;
  // The files read, with their bytes (for the tokenizer's fingerprint), in reading order.
  std::vector<std::pair<std::filesystem::path, std::string>> files;
};

// Reads tokenizer_config.json and special_tokens_map.json in `dir` when they are there (neither is required).
// FormatError "FILE: KEY: what is wrong; hint" for a file that is no JSON object or a value of the wrong shape.
SpecialTokenFiles read_special_token_files(const std::filesystem::path& dir);

}  // namespace tessera::text
