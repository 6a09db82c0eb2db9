// implements: text/tokenizer.hpp: which files a path names, the special ids, the fingerprint.
#include "tessera/text/tokenizer.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <variant>

#include "tessera/core/error.hpp"
#include "tessera/text/byte_level_bpe.hpp"
#include "tessera/text/sentencepiece.hpp"
#include "tessera/text/special_tokens.hpp"
#include "text_files.hpp"

namespace tessera::text {

struct Tokenizer::Impl {
  std::variant<SentencePiece, ByteLevelBpe> model;
  std::optional<std::int64_t> bos, eos, pad;
  bool add_bos = false, add_eos = false;
  std::string fingerprint;
  std::filesystem::path source;
};

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kLoadHint =
    "give a model directory with tokenizer.json, tokenizer.model (spiece.model) or vocab.json + merges.txt, or one of "
    "those files";

// FNV-1a, 64 bits: fast, and enough to tell tokenizer files apart (not a defence against forgery).
struct Fnv1a {
  std::uint64_t state = 0xcbf29ce484222325ULL;
  void add(std::string_view bytes) {
    for (const char c : bytes) state = (state ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  }
  std::string hex() const {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(state));
    return out;
  }
};

enum class Format { sentencepiece, tokenizer_json, vocab_merges };

struct Files {
  Format format;
  fs::path main;    // tokenizer.model (spiece.model), tokenizer.json or vocab.json
  fs::path merges;  // merges.txt for vocab_merges
  std::string main_bytes;
};

bool is_file(const fs::path& path) {
  struct stat status {};
  return ::stat(path.c_str(), &status) == 0 && !S_ISDIR(status.st_mode);
}

// Whether tokenizer.json's text describes what ByteLevelBpe reads: a BPE model behind a ByteLevel pre-tokenizer.
// Anything else (a SentencePiece conversion: Metaspace, or no pre-tokenizer) defers to tokenizer.model / spiece.model.
bool is_byte_level_bpe(const fs::path& path, std::string_view text) {
  const nlohmann::json root = detail::parse_json(path, text, "a tokenizer.json is a JSON object");
  if (!root.is_object()) return false;
  const auto model = root.find("model"), pre = root.find("pre_tokenizer");
  return model != root.end() && model->is_object() && model->value("type", std::string("BPE")) == "BPE" &&
         pre != root.end() && pre->is_object() && pre->value("type", std::string()) == "ByteLevel";
}

// A directory's SentencePiece model: tokenizer.model (Llama, Code Llama), else spiece.model (T5 and Flan-T5, as
// the hub ships them and transformers' T5Tokenizer names its vocab_file).
fs::path sentencepiece_in(const fs::path& dir) {
  const fs::path model = dir / "tokenizer.model";
  if (is_file(model)) return model;
  const fs::path spiece = dir / "spiece.model";
  return is_file(spiece) ? spiece : model;
}

Files files_in_directory(const fs::path& dir) {
  const fs::path json = dir / "tokenizer.json", model = sentencepiece_in(dir), vocab = dir / "vocab.json",
                 merges = dir / "merges.txt";
  if (is_file(json)) {
    std::string bytes = detail::read_file_bytes(json, kLoadHint);
    if (!is_file(model) || is_byte_level_bpe(json, bytes)) return {Format::tokenizer_json, json, {}, std::move(bytes)};
  }
  if (is_file(model)) return {Format::sentencepiece, model, {}, detail::read_file_bytes(model, kLoadHint)};
  if (is_file(vocab) && is_file(merges))
    return {Format::vocab_merges, vocab, merges, detail::read_file_bytes(vocab, kLoadHint)};
  detail::fail(dir,
               is_file(vocab)    ? "has vocab.json but no merges.txt beside it"
               : is_file(merges) ? "has merges.txt but no vocab.json beside it"
                                 : "has no tokenizer.json, tokenizer.model, spiece.model or vocab.json + merges.txt",
               kLoadHint);
}

Files files_for(const fs::path& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) detail::fail(path, "no such file or directory", kLoadHint);
  if (S_ISDIR(status.st_mode)) return files_in_directory(path);
  if (!S_ISREG(status.st_mode))
    throw ConfigError(path.string() + ": is not a directory or regular file (a FIFO, socket or device); " +
                      std::string(kLoadHint));
  const std::string name = path.filename().string();
  const fs::path dir = path.parent_path();
  if (name == "vocab.json" || name == "merges.txt") {
    const fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
    const fs::path& other = name == "vocab.json" ? merges : vocab;
    if (!is_file(other))
      detail::fail(other, "no such file; " + name + " needs it beside it", "vocab.json and merges.txt come together");
    return {Format::vocab_merges, vocab, merges, detail::read_file_bytes(vocab, kLoadHint)};
  }
  if (path.extension() == ".model") return {Format::sentencepiece, path, {}, detail::read_file_bytes(path, kLoadHint)};
  if (path.extension() == ".json") return {Format::tokenizer_json, path, {}, detail::read_file_bytes(path, kLoadHint)};
  throw ConfigError(path.string() + ": is not a tokenizer file (tokenizer.json, *.model, vocab.json or merges.txt); " +
                    std::string(kLoadHint));
}

}  // namespace

Tokenizer Tokenizer::load(const fs::path& path) {
  Files files = files_for(path);
  const fs::path dir = files.main.parent_path();
  SpecialTokenFiles special = read_special_token_files(dir.empty() ? fs::path(".") : dir);

  auto impl = std::make_shared<Impl>();
  impl->source = files.main;
  Fnv1a hash;
  const auto hash_file = [&](const fs::path& file, std::string_view bytes) {
    hash.add(file.filename().string());
    hash.add(std::string_view("\0", 1));
    hash.add(bytes);
  };
  hash_file(files.main, files.main_bytes);
  std::string kind;
  switch (files.format) {
    case Format::sentencepiece:
      impl->model.emplace<SentencePiece>(SentencePiece::from_model_bytes(files.main_bytes, files.main));
      kind = "sentencepiece";
      break;
    case Format::tokenizer_json:
      impl->model.emplace<ByteLevelBpe>(ByteLevelBpe::from_tokenizer_json(files.main_bytes, files.main));
      kind = "byte-level-bpe";
      break;
    case Format::vocab_merges: {
      const std::string merges = detail::read_file_bytes(files.merges, kLoadHint);
      hash_file(files.merges, merges);
      // The tokens the config files name are what transformers' GPT2Tokenizer splits out of the text.
      std::vector<AddedToken> added;
      for (const auto* token : {&special.bos, &special.eos, &special.unk, &special.pad})
        if (*token) added.push_back(**token);
      added.insert(added.end(), special.other_special.begin(), special.other_special.end());
      added.insert(added.end(), special.added_tokens_decoder.begin(), special.added_tokens_decoder.end());
      impl->model.emplace<ByteLevelBpe>(ByteLevelBpe::from_vocab_merges(files.main_bytes, files.main, merges,
                                                                        files.merges, std::move(added),
                                                                        special.add_prefix_space.value_or(false)));
      kind = "byte-level-bpe";
      break;
    }
  }
  for (const auto& [file, bytes] : special.files) hash_file(file, bytes);
  impl->fingerprint = kind + ":" + hash.hex();

  Tokenizer out(impl);
  const auto named = [&](const std::optional<AddedToken>& token, const char* key) -> std::optional<std::int64_t> {
    const auto id = out.token_id(token->content);
    if (!id)
      detail::fail(dir / "tokenizer_config.json",
                   std::string(key) + " is " + detail::quoted(token->content) + " (there or in special_tokens_map.json), "
                       "which " + files.main.filename().string() + " has no token for",
                   "name a token the tokenizer has, or remove the key");
    return id;
  };
  // A byte-level BPE's files carry no notion of BOS, EOS or padding: only the config files name them.
  const auto model_id = [&](auto of) -> std::optional<std::int64_t> {
    if (const auto* sp = std::get_if<SentencePiece>(&impl->model)) return of(*sp);
    return std::nullopt;
  };
  impl->bos = special.bos ? named(special.bos, "bos_token") : model_id([](const SentencePiece& sp) { return sp.bos_id(); });
  impl->eos = special.eos ? named(special.eos, "eos_token") : model_id([](const SentencePiece& sp) { return sp.eos_id(); });
  impl->pad = special.pad ? named(special.pad, "pad_token") : model_id([](const SentencePiece& sp) { return sp.pad_id(); });
  const std::string cls = special.tokenizer_class.value_or("");
  const auto starts = [&](std::string_view prefix) { return cls.rfind(prefix, 0) == 0; };
  impl->add_bos = special.add_bos_token.value_or(starts("Llama") || starts("CodeLlama"));
  impl->add_eos = special.add_eos_token.value_or(starts("T5"));
  if (impl->add_bos && !impl->bos)
    detail::fail(dir / "tokenizer_config.json", "add_bos_token is true, but the tokenizer has no BOS token",
                 "name one with bos_token, or set add_bos_token to false");
  if (impl->add_eos && !impl->eos)
    detail::fail(dir / "tokenizer_config.json", "add_eos_token is true, but the tokenizer has no EOS token",
                 "name one with eos_token, or set add_eos_token to false");
  return out;
}

std::vector<std::int64_t> Tokenizer::encode(std::string_view text, std::size_t chunk_bytes) const {
  return std::visit([&](const auto& model) { return model.encode(text, chunk_bytes); }, impl_->model);
}

std::vector<std::int64_t> Tokenizer::encode_with_special(std::string_view text) const {
  std::vector<std::int64_t> ids = encode(text);  // BOS shifted in: no second vector of a long text's ids
  if (impl_->add_bos) ids.insert(ids.begin(), *impl_->bos);
  if (impl_->add_eos) ids.push_back(*impl_->eos);
  return ids;
}

bool Tokenizer::add_bos_token() const { return impl_->add_bos; }
bool Tokenizer::add_eos_token() const { return impl_->add_eos; }

std::string Tokenizer::decode(std::span<const std::int64_t> ids) const {
  return std::visit([&](const auto& model) { return model.decode(ids); }, impl_->model);
}

std::int64_t Tokenizer::vocab_size() const {
  return std::visit([](const auto& model) { return model.vocab_size(); }, impl_->model);
}

std::optional<std::int64_t> Tokenizer::token_id(std::string_view piece) const {
  return std::visit([&](const auto& model) { return model.token_id(piece); }, impl_->model);
}

std::optional<std::int64_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<std::int64_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<std::int64_t> Tokenizer::pad_id() const { return impl_->pad; }

std::string_view Tokenizer::kind() const {
  return std::holds_alternative<SentencePiece>(impl_->model) ? "sentencepiece" : "byte-level-bpe";
}

const std::string& Tokenizer::fingerprint() const { return impl_->fingerprint; }
const fs::path& Tokenizer::source() const { return impl_->source; }

}  // namespace tessera::text
