// tests: text/sentencepiece.hpp on the committed models (tests/text/fixtures/, scripts/make_test_tokenizers.py):
// known ids from python sentencepiece 0.2.1, the special ids, invalid UTF-8, damaged models.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/text/sentencepiece.hpp"
#include "text_fixtures.hpp"

using namespace tessera::text;
using tessera::testing::read_text;
using tessera::testing::text_fixture;
using Catch::Contains;
using Ids = std::vector<std::int64_t>;

namespace {

SentencePiece model(const char* name) {
  const auto path = text_fixture(name) / "tokenizer.model";
  return SentencePiece::from_model_bytes(read_text(path), path);
}

}  // namespace

TEST_CASE("SentencePiece: a Llama-like BPE with byte fallback", "[text]") {
  const SentencePiece sp = model("sp_bpe");
  CHECK(sp.vocab_size() == 1000);
  CHECK(sp.encode("Hello world") == Ids{847, 298, 863, 614});  // ▁He ll o ▁world
  CHECK(sp.encode("1. e4 e5 2. Nf3 Nc6") == Ids{860, 873, 865, 288, 886, 288, 887, 860, 875, 865, 841, 882, 816, 888});
  // Characters the model lacks become their UTF-8 bytes <0xEF> <0xBC> <0xA1>.
  CHECK(sp.encode("\xef\xbc\xa1") == Ids{860, 242, 191, 164});
  CHECK(sp.encode("") == Ids{});
  CHECK(sp.decode(sp.encode("Hello  world \xf0\x9f\x99\x82")) == "Hello  world \xf0\x9f\x99\x82");
  CHECK(sp.decode(Ids{1, 289, 2}) == "the");  // <s> and </s> are control pieces
  CHECK(sp.bos_id() == 1);
  CHECK(sp.eos_id() == 2);
  CHECK_FALSE(sp.pad_id());
  CHECK(sp.unk_id() == 0);
  CHECK(sp.token_id("\xe2\x96\x81the") == 289);
  CHECK(sp.token_id("<0x41>") == 68);
  CHECK(sp.token_id("<unk>") == 0);
  CHECK_FALSE(sp.token_id("<pad>"));  // PieceToId would answer the unknown id
  // Invalid UTF-8: each bad byte is U+FFFD, here as its three byte pieces, as python sentencepiece does for bytes.
  CHECK(sp.encode("ab\xff" "cd") == Ids{263, 885, 242, 194, 192, 874, 872});
}

TEST_CASE("SentencePiece: a T5-like unigram with its own normalization", "[text]") {
  const SentencePiece sp = model("sp_unigram");
  CHECK(sp.vocab_size() == 800);
  CHECK(sp.encode("Hello world") == Ids{3, 758, 799, 797, 135, 152});
  CHECK(sp.encode("\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3 \xef\xac\x81") == Ids{3, 782, 785, 748, 42, 44});  // ＡＢＣ ﬁ -> ABC fi
  CHECK(sp.decode(sp.encode("  two  spaces ")) == "two spaces");  // extra whitespace removed, as T5's does
  CHECK(sp.decode(Ids{2}) == " \xe2\x81\x87 ");                    // the unknown piece
  CHECK_FALSE(sp.bos_id());
  CHECK(sp.eos_id() == 1);
  CHECK(sp.pad_id() == 0);
  CHECK(sp.unk_id() == 2);
  CHECK(sp.encode("x\xed\xa0\x80y") == Ids{361, 2, 77});
}

TEST_CASE("SentencePiece refuses damaged models and ids it does not have", "[text]") {
  CHECK_THROWS_AS(SentencePiece::from_model_bytes("not a model", "m/tokenizer.model"), tessera::FormatError);
  CHECK_THROWS_WITH(SentencePiece::from_model_bytes("not a model", "m/tokenizer.model"),
                    Contains("m/tokenizer.model: is not a SentencePiece model (libsentencepiece: ") &&
                        Contains("a damaged download is the usual cause: fetch the file again"));
  const std::string bytes = read_text(text_fixture("sp_bpe") / "tokenizer.model");
  CHECK_THROWS_WITH(SentencePiece::from_model_bytes(bytes.substr(0, bytes.size() / 2), "half.model"),
                    Contains("half.model: is not a SentencePiece model"));
  CHECK_THROWS_WITH(SentencePiece::from_model_bytes("", "empty.model"), Contains("empty.model: "));
  const SentencePiece sp = model("sp_bpe");
  CHECK_THROWS_WITH(sp.decode(Ids{5, 1000}), Contains("id 1000 names no piece (the model has ids 0 to 999)"));
  CHECK_THROWS_WITH(sp.decode(Ids{-3}), Contains("id -3 names no piece"));
}
