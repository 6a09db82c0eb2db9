// implements: text/byte_level_bpe.hpp (the model and encode/decode; the file formats are in
// byte_level_bpe_files.cpp).
#include "tessera/text/byte_level_bpe.hpp"

#include <algorithm>
#include <queue>

#include "byte_level_bpe_detail.hpp"
#include "tessera/core/error.hpp"
#include "tessera/text/gpt2_split.hpp"
#include "tessera/text/utf8.hpp"
#include "text_files.hpp"

namespace tessera::text {
namespace {

std::uint64_t pair_key(std::int64_t left, std::int64_t right) {
  return (static_cast<std::uint64_t>(left) << 32) | static_cast<std::uint64_t>(right);
}

// One symbol of a word being merged: a token id over `length` bytes, linked to its live neighbours (-1: none).
// A symbol merged into its left neighbour keeps length 0.
struct Symbol {
  std::int64_t id;
  std::ptrdiff_t prev, next;
  std::size_t length;
};

// A candidate merge of the symbol at `pos` with the next one. The queue pops the lowest rank, and among equal ranks
// the leftmost position: tokenizers' order (word.rs), which for a well-formed merges list is GPT-2's.
struct Candidate {
  std::uint32_t rank;
  std::size_t pos;
  std::int64_t id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void ByteLevelBpe::build(const std::filesystem::path& path, std::unordered_map<std::string, std::int64_t> vocab,
                         const std::vector<std::pair<std::string, std::string>>& merges,
                         const std::filesystem::path& merges_path) {
  path_ = path;
  for (const auto& [name, id] : vocab) {
    const auto [it, added] = id_bytes_.emplace(id, std::string());
    if (!added) {
      const auto other = std::find_if(vocab.begin(), vocab.end(), [&id = id, &name = name](const auto& e) { return e.second == id && e.first != name; });
      detail::fail(path, "tokens " + detail::quoted(other->first) + " and " + detail::quoted(name) + " both have id " +
                             std::to_string(id),
                   "each id names one token; the file is damaged");
    }
    const auto bytes = detail::byte_level_decode(name);
    it->second = bytes ? *bytes : name;
    if (bytes) by_bytes_.emplace(*bytes, id);
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
  byte_id_.fill(-1);
  for (int b = 0; b < 256; ++b)
    if (const auto it = by_bytes_.find(std::string(1, static_cast<char>(b))); it != by_bytes_.end()) byte_id_[b] = it->second;
  by_name_ = std::move(vocab);

  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto id_of = [&, &left = left, &right = right](const std::string& token) {  // bindings named: clang 14
      const auto it = by_name_.find(token);
      if (it == by_name_.end())
        detail::fail(merges_path, "merge " + std::to_string(rank + 1) + " (" + detail::quoted(left) + " " +
                                      detail::quoted(right) + ") names " + detail::quoted(token) +
                                      ", which is not in the vocabulary",
                     "the merges and the vocabulary must come from the same tokenizer");
      return it->second;
    };
    const std::int64_t l = id_of(left), r = id_of(right), merged = id_of(left + right);
    merges_[pair_key(l, r)] = Merge{static_cast<std::uint32_t>(rank), merged};  // a repeated pair: its last rank
  }
}

void ByteLevelBpe::add_tokens(std::vector<AddedToken> tokens, const std::filesystem::path& path) {
  // Ids as tokenizers' AddedVocabulary gives them, one token at a time: the id the token already has (as an added
  // token or in the vocabulary), else the next one after the vocabulary and the added tokens so far. The model's
  // size there is its number of entries, not its largest id + 1.
  const auto model_size = static_cast<std::int64_t>(by_name_.size());
  std::unordered_map<std::string, std::int64_t> given;
  std::optional<std::int64_t> max_added;
  for (AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    if (const auto it = given.find(token.content); it != given.end()) token.id = it->second;
    else if (const auto in_vocab = by_name_.find(token.content); in_vocab != by_name_.end()) token.id = in_vocab->second;
    else token.id = !max_added ? model_size : *max_added >= model_size || model_size == 0 ? *max_added + 1 : model_size;
    max_added = std::max(max_added.value_or(token.id), token.id);
    const bool own_id = given.contains(token.content) || by_name_.contains(token.content);
    if (const auto it = id_bytes_.find(token.id); it != id_bytes_.end() && !own_id)
      detail::fail(path, "added token " + detail::quoted(token.content) + " gets id " + std::to_string(token.id) +
                             ", which the vocabulary gives " + detail::quoted(token_name(token.id)),
                   "the vocabulary's ids have gaps that tokenizers would fill with added tokens; the file is damaged");
    given[token.content] = token.id;
    vocab_size_ = std::max(vocab_size_, token.id + 1);
    // The ByteLevel decoder writes a token made of byte-level characters as those bytes, any other as its text.
    const auto bytes = detail::byte_level_decode(token.content);
    id_bytes_[token.id] = bytes ? *bytes : token.content;
  }
  added_ = AddedTokens(std::move(tokens));
  for (const AddedToken& token : added_.tokens())
    if (token.special) special_ids_.insert(token.id);
}

void ByteLevelBpe::encode_word(std::string_view word, std::vector<std::int64_t>& out) const {
  if (ignore_merges_)
    if (const auto it = by_bytes_.find(std::string(word)); it != by_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&](std::int64_t id, std::size_t length) {
    const auto n = static_cast<std::ptrdiff_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, length});
  };
  // A byte the vocabulary lacks becomes unk_token (runs of them one unk with fuse_unk), or nothing without one.
  std::size_t unk_length = 0;
  for (const char c : word) {
    const std::int64_t id = byte_id_[static_cast<unsigned char>(c)];
    if (id >= 0) {
      if (unk_length > 0) add(*unk_id_, unk_length);
      unk_length = 0;
      add(id, 1);
    } else if (unk_id_) {
      if (unk_length > 0 && !fuse_unk_) add(*unk_id_, unk_length), unk_length = 0;
      unk_length += 1;
    }
  }
  if (unk_length > 0) add(*unk_id_, unk_length);

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](std::size_t pos) {
    const std::ptrdiff_t next = symbols[pos].next;
    if (next < 0) return;
    if (const auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id)); it != merges_.end())
      queue.push({it->second.rank, pos, it->second.id});
  };
  for (std::size_t pos = 0; pos + 1 < symbols.size(); ++pos) consider(pos);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.length == 0 || left.next < 0) continue;  // merged away, or the last symbol now
    // Stale when the pair at `pos` is no longer the one this candidate was made for.
    const auto it = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.id != top.id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.id;
    left.length += right.length;
    left.next = right.next;
    right.length = 0;
    if (left.next >= 0) symbols[left.next].prev = static_cast<std::ptrdiff_t>(top.pos);
    if (left.prev >= 0) consider(static_cast<std::size_t>(left.prev));
    consider(top.pos);
  }
  for (const Symbol& s : symbols)
    if (s.length > 0) out.push_back(s.id);
}

void ByteLevelBpe::encode_stretch(std::string_view stretch, std::size_t chunk_bytes,
                                  std::vector<std::int64_t>& out) const {
  // add_prefix_space gives every stretch between added tokens its leading space, as the pre-tokenizer does; a
  // chunk after a cut starts with its space already.
  const auto spaced = [&](std::string_view piece, std::string& buffer) {
    if (!add_prefix_space_ || piece.front() == ' ') return piece;
    buffer.assign(1, ' ').append(piece);
    return std::string_view(buffer);
  };
  std::string buffer;
  if (!use_regex_) {
    encode_word(spaced(stretch, buffer), out);
    return;
  }
  for (std::size_t begin = 0; begin < stretch.size();) {
    const std::size_t end = chunk_end(stretch, begin, chunk_bytes);
    const std::string_view chunk = stretch.substr(begin, end - begin);
    for (const std::string_view word : gpt2_split(begin == 0 ? spaced(chunk, buffer) : chunk)) encode_word(word, out);
    begin = end;
  }
}

std::vector<std::int64_t> ByteLevelBpe::encode(std::string_view text, std::size_t chunk_bytes) const {
  if (const auto bad = first_invalid_utf8(text))
    throw FormatError("encode with " + path_.string() + ": byte " + std::to_string(*bad) + " of the text (0x" +
                      detail::hex_byte(text[*bad]) +
                      ") is not valid UTF-8; a byte-level BPE tokenizes Unicode text, as Hugging Face tokenizers "
                      "(which takes Python str only) does: decode the data as UTF-8, replacing invalid bytes, first");
  std::vector<std::int64_t> ids;
  for (const TextSegment& segment : added_.split(text)) {
    if (segment.id) ids.push_back(*segment.id);
    else if (!segment.text.empty()) encode_stretch(segment.text, chunk_bytes, ids);
  }
  return ids;
}

std::string ByteLevelBpe::decode(std::span<const std::int64_t> ids) const {
  std::string bytes;
  for (const std::int64_t id : ids) {
    const auto it = id_bytes_.find(id);
    if (it == id_bytes_.end())
      throw FormatError("decode with " + path_.string() + ": id " + std::to_string(id) +
                        " names no token (the vocabulary has ids 0 to " + std::to_string(vocab_size() - 1) +
                        "); were these ids made by another tokenizer?");
    if (!special_ids_.contains(id)) bytes += it->second;
  }
  return lossy_utf8(bytes);
}

std::string ByteLevelBpe::token_name(std::int64_t id) const {
  for (const auto& [name, vocab_id] : by_name_)
    if (vocab_id == id) return name;
  return id_bytes_.at(id);
}

std::optional<std::int64_t> ByteLevelBpe::token_id(std::string_view token) const {
  if (const AddedToken* added = added_.find(token)) return added->id;
  if (const auto it = by_name_.find(std::string(token)); it != by_name_.end()) return it->second;
  return std::nullopt;
}

}  // namespace tessera::text
