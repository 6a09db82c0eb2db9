// tests: text/special_tokens.hpp: which file wins, the two spellings of a token, added_tokens_decoder, refusals.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tessera/core/error.hpp"
#include "tessera/text/special_tokens.hpp"
#include "text_fixtures.hpp"

using namespace tessera::text;
using tessera::testing::text_scratch_dir;
using tessera::testing::write_text;
using Catch::Contains;

TEST_CASE("read_special_token_files: no files, OPT's files, strings and objects", "[text]") {
  const auto dir = text_scratch_dir("special");
  const SpecialTokenFiles none = read_special_token_files(dir);
  CHECK_FALSE(none.bos);
  CHECK(none.files.empty());

  write_text(dir / "tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": {"__type": "AddedToken",
      "content": "</s>", "lstrip": false, "rstrip": true, "normalized": true, "single_word": false},
      "pad_token": null, "mask_token": {"content": "<mask>", "lstrip": true}, "add_prefix_space": true,
      "additional_special_tokens": ["<a>", "<b>"]})");
  const SpecialTokenFiles config = read_special_token_files(dir);
  CHECK(config.bos->content == "<s>");
  CHECK(config.bos->id == -1);
  CHECK(config.bos->special);
  CHECK(config.eos->content == "</s>");
  CHECK(config.eos->rstrip);
  CHECK_FALSE(config.pad);
  REQUIRE(config.other_special.size() == 3);
  CHECK(config.other_special[0].content == "<mask>");
  CHECK(config.other_special[0].lstrip);
  CHECK(config.other_special[2].content == "<b>");
  CHECK(config.add_prefix_space == true);
  CHECK(config.files.size() == 1);

  // special_tokens_map.json's keys replace the config's (transformers 5, for a config without added_tokens_decoder).
  write_text(dir / "special_tokens_map.json", R"({"bos_token": "</s>", "pad_token": {"content": "<pad>"}})");
  const SpecialTokenFiles both = read_special_token_files(dir);
  CHECK(both.bos->content == "</s>");
  CHECK(both.eos->content == "</s>");
  CHECK(both.pad->content == "<pad>");
  CHECK(both.files.size() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("read_special_token_files: added_tokens_decoder, and special_tokens_map.json is then not read", "[text]") {
  const auto dir = text_scratch_dir("special-decoder");
  write_text(dir / "tokenizer_config.json", R"({"bos_token": "<s>", "added_tokens_decoder": {
      "0": {"content": "<s>", "special": true}, "50265": {"content": "<extra>", "special": false, "normalized": true}}})");
  write_text(dir / "special_tokens_map.json", R"({"bos_token": "</s>"})");
  const SpecialTokenFiles read = read_special_token_files(dir);
  CHECK(read.bos->content == "<s>");
  REQUIRE(read.added_tokens_decoder.size() == 2);
  CHECK(read.added_tokens_decoder[1].id == 50265);
  CHECK_FALSE(read.added_tokens_decoder[1].special);
  CHECK(read.files.size() == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("read_special_token_files refuses values of the wrong shape by file and key", "[text]") {
  const auto dir = text_scratch_dir("special-bad");
  const auto config = dir / "tokenizer_config.json";
  const auto refusal = [&](const char* text) {
    write_text(config, text);
    try {
      read_special_token_files(dir);
    } catch (const tessera::FormatError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal(R"({"bos_token": 7})") ==
        config.string() + ": bos_token: must be a string, an object or null, got 7; a special token is a string or an "
                          "object {\"content\": \"...\", \"lstrip\": false, ...}; fix the file or remove it");
  CHECK_THAT(refusal(R"({"eos_token": {"lstrip": true}})"), Contains("eos_token: has no string \"content\""));
  CHECK_THAT(refusal(R"({"pad_token": {"content": "<pad>", "rstrip": 1}})"), Contains("pad_token.rstrip: must be true or false, got 1"));
  CHECK_THAT(refusal(R"({"add_prefix_space": "no"})"), Contains("add_prefix_space: must be true or false"));
  CHECK_THAT(refusal(R"({"added_tokens_decoder": {"x": {"content": "<s>"}}})"), Contains("key \"x\" is not a token id"));
  CHECK_THAT(refusal(R"({"additional_special_tokens": "<a>"})"), Contains("additional_special_tokens: must be a list"));
  CHECK_THAT(refusal("[1, 2]"), Contains("tokenizer_config.json: is not a JSON object, got an array"));
  CHECK_THAT(refusal("{\"bos_token\": "), Contains("tokenizer_config.json: is not valid JSON"));
  std::filesystem::remove_all(dir);
}
