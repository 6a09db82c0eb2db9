#pragma once
// defines: the labs' text data and the tokens it becomes (docs/data.md):
//   TextKind, TextRows   documents (plain text, JSONL "text": packed into one stream) or instructions (Alpaca-style
//                        JSON / JSONL: one row each, with the length of its prompt)
//   is_text_data         whether data= names a text file (.txt, .json, .jsonl) rather than tokens
//   alpaca_prompt        litgpt's Alpaca prompt template
//   read_text_rows       reads and tokenizes a text file, every record checked (file:line and the fix)
//   load_text_rows       the same through a token cache beside the file (<file>.<tokenizer>.tokens), written once
//                        and reused while it names this source (size, mtime) and tokenizer (fingerprint)
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/text/tokenizer.hpp"

namespace tessera::data {

struct TableRows;

enum class TextKind { documents, instructions };

struct TextRows {
  TextKind kind = TextKind::documents;
  // Every row's tokens, back to back; row i is tokens[starts[i], starts[i + 1]).
  std::vector<std::uint16_t> tokens;
  std::vector<std::uint64_t> starts{0};
  // instructions: row i's first prompt_lengths[i] tokens are the prompt (BOS and the template); documents: 0.
  std::vector<std::uint32_t> prompt_lengths;

  std::int64_t rows() const { return static_cast<std::int64_t>(prompt_lengths.size()); }
};

// data= ends in .txt, .json or .jsonl.
bool is_text_data(const std::filesystem::path& data);

// litgpt's Alpaca prompt: the preamble, "### Instruction:\n<instruction>\n\n", "### Input:\n<input>\n\n" when the
// input is not empty, then "### Response:\n".
std::string alpaca_prompt(std::string_view instruction, std::string_view input);

// Reads `file` and tokenizes it with `tokenizer`:
//   .txt            documents: each non-blank line (one game, one paragraph)
//   .jsonl, .json   a JSON Lines file, or one JSON array, of objects: with "instruction" and "output" (and optionally
//                   "input") they are instructions; with "text", documents. The first record decides; all must agree.
// A document is tokenizer.encode_with_special(text) then EOS (when the tokenizer has one and has not added it).
// An instruction is the row of litgpt 0.5.7's SFTDataset: BOS (when add_bos_token()), encode(prompt) with prompt =
// alpaca_prompt(instruction, input), then encode(output) (the response tokenized on its own) and EOS; the prompt
// length counts BOS and the prompt's tokens.
// ConfigError "FILE:LINE: reason; fix" for a missing file, a line that is no JSON object, a missing or non-string
// key, an empty text or output, a record of the other kind, no records at all, or a token id above 65535 (tokens are
// kept as uint16). On a terminal, a progress bar on stderr.
TextRows read_text_rows(const std::filesystem::path& file, const text::Tokenizer& tokenizer);

// The same from a table (data/table_rows.hpp, in its order): instructions when it has "instruction" and "output"
// string columns ("input" optional: an Alpaca data set, Alpaca2k's), else documents of `text_column`. Errors name
// the table's file, row and column.
TextRows read_table_text_rows(const TableRows& table, const std::string& text_column,
                              const text::Tokenizer& tokenizer);

// The cache file load_text_rows uses for `file` and `tokenizer`: "<file>.<kind>-<8 hex digits of its
// fingerprint>.tokens" beside it.
std::filesystem::path token_cache_path(const std::filesystem::path& file, const text::Tokenizer& tokenizer);

// read_text_rows through the cache: reads the cache when its header names `file` (absolute path, size and mtime)
// and `tokenizer` (fingerprint), else tokenizes and writes it (under a temporary name renamed into place, so a
// killed run leaves none; a directory it cannot write to only skips the cache). A cache whose header matches but
// whose body is damaged is a FormatError naming it and saying to delete it.
TextRows load_text_rows(const std::filesystem::path& file, const text::Tokenizer& tokenizer);

}  // namespace tessera::data
