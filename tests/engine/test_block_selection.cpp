// wrap_blocks and checkpoint_blocks read against a family's units (engine/block_selection.hpp), on a made-up
// BLIP-2-like layout with three block types and three other units.
#include <catch2/catch.hpp>

#include "tessera/core/error.hpp"
#include "tessera/engine/block_selection.hpp"

using namespace tessera;
using models::UnitInfo;

namespace {

const std::vector<UnitInfo> kUnits = {
    {"vision_model.embeddings", "", true},
    {"vision_model.encoder.layers.0", "Blip2EncoderLayer", true},
    {"vision_model.encoder.layers.1", "Blip2EncoderLayer", true},
    {"qformer.encoder.layer.0", "Blip2QFormerLayer", false},
    {"language_projection", "", false},
    {"language_model.model.decoder.layers.0", "OPTDecoderLayer", true},
    {"language_model.lm_head", "", true},
};

std::vector<bool> flags(std::initializer_list<int> on) {
  std::vector<bool> out(kUnits.size(), false);
  for (int u : on) out[static_cast<std::size_t>(u)] = true;
  return out;
}

}  // namespace

TEST_CASE("checkpoint_blocks: all block types, or the ones named", "[engine][block_selection]") {
  CHECK(checkpointed_blocks("all", kUnits, "blip2") == flags({1, 2, 3, 5}));
  CHECK(checkpointed_blocks("Blip2QFormerLayer, OPTDecoderLayer", kUnits, "blip2") == flags({3, 5}));
  CHECK(checkpointed_blocks("Blip2EncoderLayer,,", kUnits, "blip2") == flags({1, 2}));
  // Module names are not block types: checkpointing is by block type only.
  CHECK_THROWS_WITH(checkpointed_blocks("language_projection", kUnits, "blip2"),
                    Catch::Contains("checkpoint_blocks=language_projection: 'language_projection' is no block type "
                                    "of blip2; its block types are Blip2EncoderLayer, Blip2QFormerLayer, "
                                    "OPTDecoderLayer (or all)"));
  CHECK_THROWS_AS(checkpointed_blocks("none", kUnits, "blip2"), ConfigError);
}

TEST_CASE("wrap_blocks: block types and module names become units, the rest is the root", "[engine][block_selection]") {
  CHECK(wrapped_units("all", kUnits, "blip2") == flags({1, 2, 3, 5}));
  CHECK(wrapped_units("none", kUnits, "blip2") == flags({}));
  // The seed's auto_wrap_policy={Blip2EncoderLayer, Blip2QFormerLayer, OPTDecoderLayer}.
  CHECK(wrapped_units("Blip2EncoderLayer,Blip2QFormerLayer,OPTDecoderLayer", kUnits, "blip2") == flags({1, 2, 3, 5}));
  // By PEFT's suffix rule: "lm_head" names language_model.lm_head; "head" names nothing ("lm_head" is one part).
  CHECK(wrapped_units("OPTDecoderLayer,lm_head", kUnits, "blip2") == flags({5, 6}));
  CHECK_THROWS_WITH(wrapped_units("head", kUnits, "blip2"),
                    Catch::Contains("'head' is no block type or module of blip2") &&
                        Catch::Contains("its other units vision_model.embeddings, language_projection, "
                                        "language_model.lm_head"));
  CHECK_THROWS_WITH(wrapped_units("none,OPTDecoderLayer", kUnits, "blip2"), Catch::Contains("none"));
}
