// implements: src/text/sentencepiece_chunking.hpp.
//
// Why the conditions below make chunks exact, for libsentencepiece 0.1.97 (normalizer.cc, bpe_model.cc,
// sentencepiece_processor.cc) and a cut c, a single space between characters that are neither whitespace nor "▁":
// - Normalization: without a rule table each character is copied (an invalid byte as U+FFFD), ' ' becomes "▁" and
//   a dummy "▁" starts the text; remove_extra_whitespaces only changes runs of spaces and the text's two ends, which
//   a cut never is. So normalize(t) = normalize(t[0, c)) + normalize(t[c + 1, end)): the second part's dummy prefix
//   is the cut's "▁".
// - Pieces: user-defined pieces are matched greedily (on the raw and the normalized text) and BPE merges only make
//   pieces of the vocabulary. A piece across the cut would hold "x▁" (x not "▁") or a space: none may. The two
//   sides' merges never meet, and the merge queue orders each side's merges alone as it does together (score, then
//   leftmost).
// - Unused pieces are taken apart through a map that the last merge making them, anywhere in the text, wrote: none
//   may be in the model. Unknown pieces in a row become one (without byte fallback): the second part starts with
//   "▁", which must then be a piece.
// A unigram model's Viterbi adds float scores along the whole text, and the rounding of those sums decides ties:
// cutting would change its ids.
#include "sentencepiece_chunking.hpp"

#include <cstdint>
#include <utility>

namespace tessera::text::detail {
namespace {

// Protobuf's wire format: (field << 3 | wire type) keys, varints, length-delimited bytes, fixed 32 / 64 bits.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}
  bool ok() const { return ok_; }
  bool done() const { return !ok_ || at_ >= bytes_.size(); }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64 && at_ < bytes_.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    ok_ = false;
    return 0;
  }
  // The next field's number and wire type.
  std::pair<std::uint64_t, int> key() {
    const std::uint64_t k = varint();
    return {k >> 3, static_cast<int>(k & 7)};
  }
  std::string_view bytes() {
    const std::uint64_t n = varint();
    if (!ok_ || n > bytes_.size() - at_) {
      ok_ = false;
      return {};
    }
    const std::string_view out = bytes_.substr(at_, n);
    at_ += n;
    return out;
  }
  void skip(int wire) {
    switch (wire) {
      case 0: varint(); break;
      case 1: advance(8); break;
      case 2: bytes(); break;
      case 5: advance(4); break;
      default: ok_ = false;  // groups (3, 4) are not in sentencepiece_model.proto
    }
  }

 private:
  void advance(std::size_t n) {
    if (n > bytes_.size() - at_) ok_ = false;
    else at_ += n;
  }
  std::string_view bytes_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

// sentencepiece_model.proto: ModelProto.pieces = 1 (piece = 1, type = 3), trainer_spec = 2 (model_type = 3,
// treat_whitespace_as_suffix = 24, byte_fallback = 35), normalizer_spec = 3 (precompiled_charsmap = 2,
// add_dummy_prefix = 3, escape_whitespaces = 5). A message given twice merges: later scalars win.
enum PieceType { kNormal = 1, kUserDefined = 4, kUnused = 5 };
enum ModelType { kUnigram = 1, kBpe = 2 };

struct Spec {
  int model_type = kUnigram;
  bool treat_whitespace_as_suffix = false, byte_fallback = false;
  bool has_rules = false, add_dummy_prefix = true, escape_whitespaces = true;
  bool has_unused = false, has_space_piece = false;
  std::string crossing;  // a piece that may span a cut
};

// Whether a piece may span a cut: a space anywhere, or a "▁" after a character other than "▁".
bool may_cross(std::string_view piece) {
  constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";
  if (piece.find(' ') != std::string_view::npos) return true;
  std::size_t lead = 0;
  while (piece.substr(lead, 3) == kSpaceSymbol) lead += 3;
  return piece.find(kSpaceSymbol, lead) != std::string_view::npos;
}

void read_piece(std::string_view bytes, Spec& spec, bool& ok) {
  WireReader r(bytes);
  std::string_view piece;
  std::uint64_t type = kNormal;
  while (!r.done()) {
    const auto [field, wire] = r.key();
    if (field == 1 && wire == 2) piece = r.bytes();
    else if (field == 3 && wire == 0) type = r.varint();
    else r.skip(wire);
  }
  ok = ok && r.ok();
  if (type == kUnused) spec.has_unused = true;
  if (type != kNormal && type != kUserDefined) return;
  if (piece == "\xe2\x96\x81") spec.has_space_piece = true;
  if (spec.crossing.empty() && may_cross(piece)) spec.crossing = piece;
}

void read_trainer(std::string_view bytes, Spec& spec, bool& ok) {
  WireReader r(bytes);
  while (!r.done()) {
    const auto [field, wire] = r.key();
    if (field == 3 && wire == 0) spec.model_type = static_cast<int>(r.varint());
    else if (field == 24 && wire == 0) spec.treat_whitespace_as_suffix = r.varint() != 0;
    else if (field == 35 && wire == 0) spec.byte_fallback = r.varint() != 0;
    else r.skip(wire);
  }
  ok = ok && r.ok();
}

void read_normalizer(std::string_view bytes, Spec& spec, bool& ok) {
  WireReader r(bytes);
  while (!r.done()) {
    const auto [field, wire] = r.key();
    if (field == 2 && wire == 2) spec.has_rules = !r.bytes().empty();
    else if (field == 3 && wire == 0) spec.add_dummy_prefix = r.varint() != 0;
    else if (field == 5 && wire == 0) spec.escape_whitespaces = r.varint() != 0;
    else r.skip(wire);
  }
  ok = ok && r.ok();
}

}  // namespace

std::string sentencepiece_chunk_problem(std::string_view model_proto) {
  Spec spec;
  bool ok = true;
  WireReader r(model_proto);
  while (!r.done()) {
    const auto [field, wire] = r.key();
    if (wire != 2 || field < 1 || field > 3) {
      r.skip(wire);
      continue;
    }
    const std::string_view message = r.bytes();
    if (field == 1) read_piece(message, spec, ok);
    else if (field == 2) read_trainer(message, spec, ok);
    else read_normalizer(message, spec, ok);
  }
  if (!ok || !r.ok()) return "a model file whose fields tessera could not read";
  if (spec.model_type == kUnigram)
    return "a unigram model, whose best path adds float scores along the whole text, so that a cut could change "
           "its ids";
  if (spec.model_type != kBpe) return "a word or character model (only BPE models are cut)";
  if (spec.has_rules) return "a normalization rule table, whose rules could reach across a cut";
  if (!spec.add_dummy_prefix) return "add_dummy_prefix is false, so the text after a cut would lose its \"▁\"";
  if (!spec.escape_whitespaces) return "escape_whitespaces is false";
  if (spec.treat_whitespace_as_suffix) return "treat_whitespace_as_suffix is true";
  if (spec.has_unused) return "unused pieces, which are taken apart as the last merge anywhere in the text says";
  if (!spec.crossing.empty())
    return "the piece \"" + spec.crossing + "\", which holds a space, or \"▁\" after another character, and so could "
           "span a cut";
  if (!spec.byte_fallback && !spec.has_space_piece)
    return "no byte fallback and no \"▁\" piece, so unknown pieces on both sides of a cut would merge";
  return "";
}

}  // namespace tessera::text::detail
