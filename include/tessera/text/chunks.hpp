#pragma once
// defines: where the tokenizers cut a long text into chunks that they encode one at a time, so that their working
// memory follows the chunk, not the text, and the ids are those of the whole text (docs/tokenizers.md#long-texts).
#include <cstddef>
#include <string_view>

namespace tessera::text {

// Texts longer than this many bytes are encoded in chunks of about this size (1 MiB).
inline constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

// Whether `text` may be cut just before byte `at`: text[at] is a space (U+0020), and the characters on either side
// of it are valid UTF-8 and neither whitespace (Unicode White_Space, GPT-2's \s) nor U+2581 (SentencePiece's "▁").
bool is_chunk_cut(std::string_view text, std::size_t at);

// The end of the chunk that starts at byte `begin` of `text`: the first cut at or after begin + chunk_bytes, or
// text.size() when there is none (a text without a cut is one chunk, however long it is).
std::size_t chunk_end(std::string_view text, std::size_t begin, std::size_t chunk_bytes);

}  // namespace tessera::text
