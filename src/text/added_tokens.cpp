// implements: text/added_tokens.hpp.
#include "tessera/text/added_tokens.hpp"

#include <algorithm>

#include "tessera/text/gpt2_split.hpp"
#include "tessera/text/utf8.hpp"

namespace tessera::text {
namespace {

// The last character of text[0, end) and the first of text[begin, ...): what single_word looks at. Text here is
// valid UTF-8, so stepping back over continuation bytes finds the lead byte.
char32_t char_before(std::string_view text, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return decode_utf8(text, start).code;
}

// Where the run of whitespace that ends at `end` begins (Rust regex "\s*$" on text[0, end)).
std::size_t whitespace_run_start(std::string_view text, std::size_t end) {
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    if (!is_space_char(decode_utf8(text, start).code)) break;
    end = start;
  }
  return end;
}

// Where the run of whitespace that starts at `begin` ends ("^\s*" on text[begin, ...)).
std::size_t whitespace_run_end(std::string_view text, std::size_t begin) {
  while (begin < text.size()) {
    const Utf8Char c = decode_utf8(text, begin);
    if (!is_space_char(c.code)) break;
    begin += c.length;
  }
  return begin;
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) {
  for (AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    const auto same = std::find_if(tokens_.begin(), tokens_.end(),
                                   [&](const AddedToken& t) { return t.content == token.content; });
    if (same != tokens_.end()) *same = std::move(token);
    else tokens_.push_back(std::move(token));
  }
  raw_.by_first_byte.resize(256);
  normalized_.by_first_byte.resize(256);
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    Pass& pass = tokens_[i].normalized ? normalized_ : raw_;
    pass.by_first_byte[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
    pass.empty = false;
  }
  for (Pass* pass : {&raw_, &normalized_})
    for (auto& list : pass->by_first_byte)
      std::stable_sort(list.begin(), list.end(),
                       [&](std::size_t a, std::size_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

const AddedToken* AddedTokens::find(std::string_view content) const {
  const auto it = std::find_if(tokens_.begin(), tokens_.end(), [&](const AddedToken& t) { return t.content == content; });
  return it == tokens_.end() ? nullptr : &*it;
}

const AddedToken* AddedTokens::find(std::int64_t id) const {
  const auto it = std::find_if(tokens_.begin(), tokens_.end(), [&](const AddedToken& t) { return t.id == id; });
  return it == tokens_.end() ? nullptr : &*it;
}

void AddedTokens::find_in(std::string_view text, const Pass& pass, std::vector<TextSegment>& out) const {
  if (pass.empty || text.empty()) {
    out.push_back({text, std::nullopt});
    return;
  }
  std::size_t done = 0;  // text[0, done) is in `out` already
  std::size_t at = 0;    // where the search for the next match starts: the end of the last one, kept or not
  while (at < text.size()) {
    const AddedToken* match = nullptr;
    for (const std::size_t i : pass.by_first_byte[static_cast<unsigned char>(text[at])]) {
      if (text.substr(at, tokens_[i].content.size()) == tokens_[i].content) {
        match = &tokens_[i];
        break;
      }
    }
    if (match == nullptr) {
      ++at;
      continue;
    }
    std::size_t start = at, stop = at + match->content.size();
    at = stop;
    if (match->single_word) {
      const bool free_left = start == 0 || !is_word_char(char_before(text, start));
      const bool free_right = stop == text.size() || !is_word_char(decode_utf8(text, stop).code);
      if (!free_left || !free_right) continue;
    }
    // lstrip never reaches back into what an earlier match took.
    if (match->lstrip) start = std::max(whitespace_run_start(text, start), done);
    if (match->rstrip) stop = whitespace_run_end(text, stop);
    if (done < start) out.push_back({text.substr(done, start - done), std::nullopt});
    out.push_back({text.substr(start, stop - start), match->id});
    done = stop;
  }
  if (done < text.size()) out.push_back({text.substr(done), std::nullopt});
}

std::vector<TextSegment> AddedTokens::split(std::string_view text) const {
  std::vector<TextSegment> first;
  find_in(text, raw_, first);
  std::vector<TextSegment> out;
  for (const TextSegment& segment : first) {
    if (segment.id) out.push_back(segment);
    else find_in(segment.text, normalized_, out);
  }
  return out;
}

}  // namespace tessera::text
