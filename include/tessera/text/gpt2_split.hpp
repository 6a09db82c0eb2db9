#pragma once
// defines: gpt2_split, GPT-2's pre-tokenization (the regex of Hugging Face tokenizers' ByteLevel pre-tokenizer)
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out by hand, and the Unicode classes behind it and behind added tokens' single_word / lstrip / rstrip,
// read from a table generated from the tokenizers package (scripts/gen_unicode_classes.py).
#include <string_view>
#include <vector>

namespace tessera::text {

// The branch of the regex a character takes: \p{L}, \p{N}, \s, or none of them.
enum class CharClass { other, letter, number, space };

CharClass gpt2_char_class(char32_t code);
// Rust regex's \w and \s (Unicode), which tokenizers' added tokens test their neighbours with.
bool is_word_char(char32_t code);
bool is_space_char(char32_t code);

// The pieces the regex cuts valid UTF-8 `text` into, in order; together they are exactly `text` (empty text gives
// no piece). Views into `text`.
std::vector<std::string_view> gpt2_split(std::string_view text);

}  // namespace tessera::text
