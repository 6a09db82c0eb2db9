#pragma once
// defines: AddedToken and AddedTokens, the tokens a Hugging Face tokenizer matches in the raw text before its model
// sees it (tokenizer.json's added_tokens: <s>, </s>, <pad>, <|endoftext|>, ...), split out as Hugging Face tokenizers'
// AddedVocabulary does: leftmost-longest matches over the text, first of the tokens with normalized = false, then of
// the others in what is left; a single_word token only where no word character touches it; lstrip / rstrip tokens
// take the whitespace beside them with them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::text {

struct AddedToken {
  std::string content;
  std::int64_t id = 0;
  bool special = false;  // special tokens are dropped by decode
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

// A stretch of the text: an added token's id, or text for the pre-tokenizer and model (no id).
struct TextSegment {
  std::string_view text;
  std::optional<std::int64_t> id;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  // Tokens with empty content are ignored (as tokenizers does); one content given twice keeps its last entry.
  explicit AddedTokens(std::vector<AddedToken> tokens);

  // `text` cut into segments in order: together they cover `text` (an lstrip/rstrip token's segment includes the
  // whitespace it took). Text segments may be empty. Views into `text`.
  std::vector<TextSegment> split(std::string_view text) const;

  const AddedToken* find(std::string_view content) const;
  const AddedToken* find(std::int64_t id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  // Indices into tokens_ by the first byte of their content, longest first: the leftmost-longest match at a byte
  // is the first of its list that matches.
  struct Pass {
    std::vector<std::vector<std::size_t>> by_first_byte;
    bool empty = true;
  };
  void find_in(std::string_view text, const Pass& pass, std::vector<TextSegment>& out) const;

  std::vector<AddedToken> tokens_;
  Pass raw_;         // normalized = false: matched in the text as given
  Pass normalized_;  // normalized = true: matched in what the first pass left (no normalizer: the same text)
};

}  // namespace tessera::text
