// BLIP-2 presets carry the published shapes: their parameter counts are checked without building weights.
#include <catch2/catch.hpp>

#include "tessera/core/error.hpp"
#include "tessera/models/blip2_config.hpp"

using namespace tessera;
using namespace tessera::models;

TEST_CASE("BLIP-2 presets have their published parameter counts", "[models][blip2]") {
  // transformers 5.17, Blip2ForConditionalGeneration(Blip2Config(text_config=...)) built under
  // `with torch.device("meta")`: vision model 985,952,256, Q-Former 105,137,664 (no text path), query_tokens 24,576,
  // language_projection (T, 768) with bias. blip2-opt-2.7b sums to 3,744,679,936 and blip2-opt-6.7b to
  // 7,752,738,304 there. With Flan-T5 transformers 5.17 ties lm_head on the meta device (3,876,648,448 for -xl);
  // the published checkpoints hold their own lm_head (32128 x d_model more): 3.94B and 12.2B, as published.
  const auto opt27 = blip2_opt_preset("blip2-opt-2.7b");
  CHECK(opt27.vision.parameter_count() == 985'952'256);
  CHECK(opt27.qformer.parameter_count() == 105'137'664);
  CHECK(opt27.bridge_parameter_count() == 24'576 + 1'968'640);
  CHECK(opt27.parameter_count() == 3'744'679'936);
  CHECK(blip2_opt_preset("blip2-opt-6.7b").parameter_count() == 7'752'738'304);
  CHECK(blip2_t5_preset("blip2-flan-t5-xl").parameter_count() == 3'876'648'448 + 32128LL * 2048);
  CHECK(blip2_t5_preset("blip2-flan-t5-xxl").parameter_count() == 12'229'596'672);
  CHECK(opt27.vision.positions() == 257);
  for (auto name : blip2_opt_preset_names()) CHECK_NOTHROW(blip2_opt_preset(name).validate(name));
  for (auto name : blip2_t5_preset_names()) CHECK_NOTHROW(blip2_t5_preset(name).validate(name));
}

TEST_CASE("BLIP-2: inconsistent shapes and unknown presets are refused by name", "[models][blip2]") {
  CHECK_THROWS_WITH(blip2_opt_preset("blip2-opt-13b"), Catch::Contains("model=blip2-opt-13b") &&
                                                           Catch::Contains("blip2-opt-6.7b"));
  auto c = blip2_t5_preset("tiny");
  c.qformer.encoder_hidden_size = 64;
  CHECK_THROWS_WITH(c.validate("x"), Catch::Contains("qformer_config.encoder_hidden_size=64 differs"));
  c = blip2_t5_preset("tiny");
  c.vision.patch_size = 7;
  CHECK_THROWS_WITH(c.validate("x"), Catch::Contains("vision_config.image_size=32 is not a multiple"));
  c = blip2_t5_preset("tiny");
  c.text.d_kv = 0;
  CHECK_THROWS_AS(c.validate("x"), ConfigError);
}
