// implements: text/sentencepiece.hpp over libsentencepiece (0.1.97 in Debian 12).
#include "tessera/text/sentencepiece.hpp"

#include <dlfcn.h>
#include <sentencepiece_processor.h>

#include "sentencepiece_chunking.hpp"
#include "tessera/core/error.hpp"
#include "text_files.hpp"

namespace tessera::text {

struct SentencePiece::Impl {
  sentencepiece::SentencePieceProcessor processor;
  std::string why_unchunked;
};

namespace {

std::optional<std::int64_t> valid(int id) { return id >= 0 ? std::optional<std::int64_t>(id) : std::nullopt; }

// libsentencepiece and LibTorch's c10 both export a global FLAGS_minloglevel of different types, and the dynamic
// linker binds both libraries to the first one loaded (cmake/TesseraDependencies.cmake, TESSERA_TORCH_TARGETS). When
// sentencepiece's references resolve to another library's variable, its static constructor has already written
// its flag object over that variable and the bytes after it: refuse to go on in such a process.
void require_own_log_flag() {
  static const std::string problem = [] {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&sentencepiece::SetRandomGeneratorSeed), &info) == 0 || info.dli_fname == nullptr)
      return std::string();
    void* library = ::dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (library == nullptr) return std::string();
    void* own = ::dlsym(library, "FLAGS_minloglevel");
    void* bound = ::dlsym(RTLD_DEFAULT, "FLAGS_minloglevel");
    Dl_info owner{};
    const bool clash = own != nullptr && bound != nullptr && own != bound;
    const std::string other = clash && ::dladdr(bound, &owner) != 0 && owner.dli_fname != nullptr ? owner.dli_fname : "";
    ::dlclose(library);
    if (!clash) return std::string();
    return std::string(info.dli_fname) + " was loaded after " + (other.empty() ? "another library" : other) +
           ", which also defines FLAGS_minloglevel: sentencepiece has written its flag over that library's memory. "
           "Link libsentencepiece before LibTorch (tessera::tessera does: cmake/TesseraDependencies.cmake); a "
           "program that links torch ahead of tessera must put tessera::sentencepiece first";
  }();
  if (!problem.empty()) throw Error(problem);
}

}  // namespace

SentencePiece SentencePiece::from_model_bytes(std::string_view bytes, const std::filesystem::path& path) {
  require_own_log_flag();
  auto impl = std::make_shared<Impl>();
  const auto status = impl->processor.LoadFromSerializedProto(bytes);
  if (!status.ok())
    detail::fail(path, "is not a SentencePiece model (libsentencepiece: " + std::string(status.message()) + ")",
                 "give the tokenizer.model of a SentencePiece tokenizer (Llama, T5), or a byte-level BPE's "
                 "tokenizer.json; a damaged download is the usual cause: fetch the file again");
  // A model without pieces loads, but no text encodes with it.
  if (impl->processor.GetPieceSize() <= 0) detail::fail(path, "has no pieces", "the file is damaged: fetch it again");
  impl->why_unchunked = detail::sentencepiece_chunk_problem(bytes);
  SentencePiece out;
  out.impl_ = std::move(impl);
  out.path_ = path;
  return out;
}

std::vector<std::int64_t> SentencePiece::encode(std::string_view text, std::size_t chunk_bytes) const {
  std::vector<std::int64_t> out;
  std::vector<int> ids;
  const auto add = [&](std::string_view part) {
    ids.clear();
    const auto status = impl_->processor.Encode(part, &ids);
    if (!status.ok())
      throw Error("encode with " + path_.string() + ": libsentencepiece failed: " + std::string(status.message()));
    out.insert(out.end(), ids.begin(), ids.end());
  };
  if (!impl_->why_unchunked.empty()) {
    add(text);
    return out;
  }
  // The space at a cut is left out: the dummy prefix of the chunk after it gives its "▁".
  std::size_t begin = 0;
  do {
    const std::size_t end = chunk_end(text, begin, chunk_bytes);
    add(text.substr(begin, end - begin));
    begin = end + 1;
  } while (begin < text.size());
  return out;
}

std::string SentencePiece::decode(std::span<const std::int64_t> ids) const {
  std::vector<int> narrow;
  narrow.reserve(ids.size());
  for (const std::int64_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw FormatError("decode with " + path_.string() + ": id " + std::to_string(id) +
                        " names no piece (the model has ids 0 to " + std::to_string(vocab_size() - 1) +
                        "); were these ids made by another tokenizer?");
    narrow.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = impl_->processor.Decode(narrow, &text);
  if (!status.ok())
    throw Error("decode with " + path_.string() + ": libsentencepiece failed: " + std::string(status.message()));
  return text;
}

std::optional<std::int64_t> SentencePiece::token_id(std::string_view piece) const {
  // PieceToId answers the unknown id for a piece it lacks; only a round trip tells.
  const int id = impl_->processor.PieceToId(piece);
  if (id < 0 || impl_->processor.IdToPiece(id) != piece) return std::nullopt;
  return id;
}

std::int64_t SentencePiece::vocab_size() const { return impl_->processor.GetPieceSize(); }
std::optional<std::int64_t> SentencePiece::bos_id() const { return valid(impl_->processor.bos_id()); }
std::optional<std::int64_t> SentencePiece::eos_id() const { return valid(impl_->processor.eos_id()); }
std::optional<std::int64_t> SentencePiece::pad_id() const { return valid(impl_->processor.pad_id()); }
std::optional<std::int64_t> SentencePiece::unk_id() const { return valid(impl_->processor.unk_id()); }
const std::string& SentencePiece::why_unchunked() const { return impl_->why_unchunked; }

}  // namespace tessera::text
