// implements: text/byte_level_bpe.hpp's readers of tokenizer.json and of vocab.json + merges.txt, and
// byte_level_bpe_detail.hpp.
#include <algorithm>
#include <array>
#include <cstdint>

#include "byte_level_bpe_detail.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/text/byte_level_bpe.hpp"
#include "tessera/text/utf8.hpp"
#include "text_files.hpp"

namespace tessera::text {
namespace detail {
namespace {

// byte -> character and back (characters below U+0144 only).
struct ByteMap {
  std::array<char32_t, 256> to_char{};
  std::array<int, 0x144> to_byte{};
  ByteMap() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = b;
    }
  }
};
const ByteMap kByteMap;

}  // namespace

char32_t byte_to_char(unsigned char b) { return kByteMap.to_char[b]; }

std::optional<std::string> byte_level_decode(std::string_view token) {
  std::string bytes;
  for (std::size_t i = 0; i < token.size();) {
    const Utf8Char c = decode_utf8(token, i);
    if (!c.valid || c.code >= kByteMap.to_byte.size() || kByteMap.to_byte[c.code] < 0) return std::nullopt;
    bytes += static_cast<char>(kByteMap.to_byte[c.code]);
    i += c.length;
  }
  return bytes;
}

std::string hex_byte(char byte) {
  constexpr char kDigits[] = "0123456789ABCDEF";
  const auto b = static_cast<unsigned char>(byte);
  return {kDigits[b >> 4], kDigits[b & 15]};
}

}  // namespace detail

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kJsonHint =
    "tessera reads the byte-level BPE tokenizer.json of GPT-2, OPT or RoBERTa as Hugging Face tokenizers writes it";

[[noreturn]] void bad(const fs::path& path, const std::string& what) { detail::fail(path, what, kJsonHint); }

const json* field(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

bool boolean(const fs::path& path, const json& object, const std::string& where, const char* key, bool fallback) {
  const json* value = field(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) bad(path, where + key + " must be true or false, got " + io::json_excerpt(*value));
  return value->get<bool>();
}

std::int64_t token_id_of(const fs::path& path, const std::string& where, const json& value) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > detail::kMaxTokenId)
    detail::fail(path, where + " must be a token id from 0 to " + std::to_string(detail::kMaxTokenId) + ", got " +
                           io::json_excerpt(value),
                 "the file is damaged");
  return value.get<std::int64_t>();
}

std::unordered_map<std::string, std::int64_t> read_vocab(const fs::path& path, const json& vocab, const std::string& where) {
  if (!vocab.is_object()) detail::fail(path, where + " must be an object {\"token\": id}, got " + io::json_type_phrase(vocab), "the file is damaged");
  std::unordered_map<std::string, std::int64_t> out;
  out.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) out.emplace(token, token_id_of(path, where + "[" + detail::quoted(token) + "]", id));
  if (out.empty()) detail::fail(path, where + " is empty", "a tokenizer needs a vocabulary");
  return out;
}

// "a b": exactly one space (tokens never hold one: GPT-2 writes it as 'Ġ').
std::optional<std::pair<std::string, std::string>> merge_line(std::string_view line) {
  const std::size_t space = line.find(' ');
  if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) return std::nullopt;
  return std::pair{std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
}

AddedToken added_token(const fs::path& path, const json& item, std::size_t index) {
  const std::string where = "added_tokens[" + std::to_string(index) + "].";
  if (!item.is_object()) bad(path, where.substr(0, where.size() - 1) + " must be an object, got " + io::json_excerpt(item));
  AddedToken token;
  const json* content = field(item, "content");
  if (content == nullptr || !content->is_string()) bad(path, where + "content must be a string");
  token.content = content->get<std::string>();
  const json* id = field(item, "id");
  if (id == nullptr) bad(path, where + "id is missing");
  token.id = token_id_of(path, where + "id", *id);
  token.special = boolean(path, item, where, "special", false);
  token.single_word = boolean(path, item, where, "single_word", false);
  token.lstrip = boolean(path, item, where, "lstrip", false);
  token.rstrip = boolean(path, item, where, "rstrip", false);
  token.normalized = boolean(path, item, where, "normalized", true);
  return token;
}

std::string type_of(const json& object) {
  const json* type = field(object, "type");
  return type != nullptr && type->is_string() ? type->get<std::string>() : "";
}

}  // namespace

ByteLevelBpe ByteLevelBpe::from_tokenizer_json(std::string_view json_text, const fs::path& path) {
  const json root = detail::parse_json(path, json_text, kJsonHint);
  if (!root.is_object()) bad(path, "is not a JSON object, got " + io::json_type_phrase(root));
  const json* model = field(root, "model");
  if (model == nullptr || !model->is_object()) bad(path, "has no \"model\" object");
  // Files written before tokenizers tagged its models have no type: a model with merges is BPE.
  const std::string type = type_of(*model).empty() && model->contains("merges") ? "BPE" : type_of(*model);
  if (type != "BPE")
    detail::fail(path, "model.type is " + detail::quoted(type) + ", not \"BPE\"",
                 "tessera reads byte-level BPE from tokenizer.json (GPT-2, OPT, RoBERTa); for a SentencePiece model "
                 "(Llama, T5) give its tokenizer.model (T5: spiece.model) instead");
  const json* normalizer = field(root, "normalizer");
  if (normalizer != nullptr)
    detail::fail(path, "normalizer is " + io::json_excerpt(*normalizer, 80) + ", not null",
                 "tessera's byte-level BPE applies no normalizer (GPT-2, OPT and RoBERTa have none); give a tokenizer "
                 "without one, or its SentencePiece tokenizer.model");
  const json* pre = field(root, "pre_tokenizer");
  if (pre == nullptr || !pre->is_object() || type_of(*pre) != "ByteLevel")
    detail::fail(path, "pre_tokenizer is " + (pre == nullptr ? std::string("null") : io::json_excerpt(*pre, 80)) +
                           ", not {\"type\": \"ByteLevel\", ...}",
                 "tessera's byte-level BPE splits text with GPT-2's regex only (the ByteLevel pre-tokenizer); other "
                 "pre-tokenizers (Metaspace, Split, Sequence) are not supported");
  const json* decoder = field(root, "decoder");
  if (decoder != nullptr && (!decoder->is_object() || type_of(*decoder) != "ByteLevel"))
    detail::fail(path, "decoder is " + io::json_excerpt(*decoder, 80) + ", not {\"type\": \"ByteLevel\"} or null",
                 "tessera decodes byte-level BPE with the ByteLevel decoder only");

  // What tessera's BPE does not do: sampling (dropout), byte fallback, WordPiece-style prefixes and suffixes.
  if (const json* dropout = field(*model, "dropout"); dropout != nullptr && !(dropout->is_number() && dropout->get<double>() == 0.0))
    detail::fail(path, "model.dropout is " + io::json_excerpt(*dropout), "BPE dropout samples a different split each call; tessera tokenizes deterministically: set it to null");
  if (boolean(path, *model, "model.", "byte_fallback", false))
    detail::fail(path, "model.byte_fallback is true", "a byte-level BPE has every byte in its vocabulary and needs no byte fallback; set it to false");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json* affix = field(*model, key); affix != nullptr && !(affix->is_string() && affix->get<std::string>().empty()))
      detail::fail(path, std::string("model.") + key + " is " + io::json_excerpt(*affix), "a byte-level BPE has none; set it to null");

  ByteLevelBpe bpe;
  const json* vocab = field(*model, "vocab");
  if (vocab == nullptr) bad(path, "model.vocab is missing");
  const json* merges_json = field(*model, "merges");
  if (merges_json == nullptr || !merges_json->is_array()) bad(path, "model.merges must be a list");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_json->size());
  for (std::size_t i = 0; i < merges_json->size(); ++i) {
    const json& m = (*merges_json)[i];
    if (m.is_string() && m.get<std::string>().starts_with("#version")) continue;
    std::optional<std::pair<std::string, std::string>> pair;
    if (m.is_string()) pair = merge_line(m.get<std::string>());
    else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
      pair = std::pair{m[0].get<std::string>(), m[1].get<std::string>()};
    if (!pair) bad(path, "model.merges[" + std::to_string(i) + "] is " + io::json_excerpt(m) + ", not \"a b\" or [\"a\", \"b\"]");
    merges.push_back(std::move(*pair));
  }
  bpe.build(path, read_vocab(path, *vocab, "model.vocab"), merges, path);
  if (const json* unk = field(*model, "unk_token")) {
    if (!unk->is_string()) bad(path, "model.unk_token must be a string or null, got " + io::json_excerpt(*unk));
    const auto it = bpe.by_name_.find(unk->get<std::string>());
    if (it == bpe.by_name_.end()) bad(path, "model.unk_token " + detail::quoted(unk->get<std::string>()) + " is not in model.vocab");
    bpe.unk_id_ = it->second;
  }
  bpe.fuse_unk_ = boolean(path, *model, "model.", "fuse_unk", false);
  bpe.ignore_merges_ = boolean(path, *model, "model.", "ignore_merges", false);
  bpe.add_prefix_space_ = boolean(path, *pre, "pre_tokenizer.", "add_prefix_space", true);
  bpe.use_regex_ = boolean(path, *pre, "pre_tokenizer.", "use_regex", true);

  std::vector<AddedToken> added;
  if (const json* list = field(root, "added_tokens")) {
    if (!list->is_array()) bad(path, "added_tokens must be a list, got " + io::json_type_phrase(*list));
    for (std::size_t i = 0; i < list->size(); ++i) added.push_back(added_token(path, (*list)[i], i));
  }
  bpe.add_tokens(std::move(added), path);
  return bpe;
}

ByteLevelBpe ByteLevelBpe::from_vocab_merges(std::string_view vocab_json, const fs::path& vocab_path,
                                             std::string_view merges_txt, const fs::path& merges_path,
                                             std::vector<AddedToken> added, bool add_prefix_space) {
  constexpr std::string_view kVocabHint = "vocab.json maps each token to its id: {\"token\": id, ...}";
  const json vocab = detail::parse_json(vocab_path, vocab_json, kVocabHint);
  std::vector<std::pair<std::string, std::string>> merges;
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < merges_txt.size();) {
    std::size_t end = merges_txt.find('\n', start);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("#version")) continue;
    auto pair = merge_line(line);
    if (!pair)
      detail::fail(merges_path, "line " + std::to_string(line_number) + " is " + detail::quoted(line) +
                                    ", not two tokens separated by one space",
                   "merges.txt has a \"#version\" line and then one merge \"a b\" per line, nothing else");
    merges.push_back(std::move(*pair));
  }
  ByteLevelBpe bpe;
  bpe.build(vocab_path, read_vocab(vocab_path, vocab, "vocab.json"), merges, merges_path);
  bpe.add_prefix_space_ = add_prefix_space;
  // added_tokens_decoder's tokens in id order, then the named ones, as transformers adds them; a token the
  // vocabulary lacks gets the next id, as there.
  std::stable_sort(added.begin(), added.end(), [](const AddedToken& a, const AddedToken& b) {
    return (a.id < 0 ? INT64_MAX : a.id) < (b.id < 0 ? INT64_MAX : b.id);
  });
  bpe.add_tokens(std::move(added), vocab_path);
  return bpe;
}

}  // namespace tessera::text
