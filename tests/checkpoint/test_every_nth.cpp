// Checkpointing policies choose blocks; the engine's parity and memory tests are in engine/test_trainer.cpp.
#include <catch2/catch.hpp>

#include "tessera/checkpoint/concept.hpp"
#include "tessera/checkpoint/every_nth.hpp"
#include "tessera/checkpoint/no_checkpoint.hpp"

using namespace tessera;

TEST_CASE("checkpointing policies pick blocks", "[checkpoint]") {
  STATIC_REQUIRE(CheckpointPolicy<NoCheckpoint>);
  STATIC_REQUIRE(CheckpointPolicy<CheckpointEveryBlock>);
  STATIC_REQUIRE_FALSE(NoCheckpoint::checkpointed(0));
  for (std::size_t b = 0; b < 8; ++b) CHECK(CheckpointEveryBlock::checkpointed(b));
  CHECK(CheckpointEveryNth<3>::checkpointed(0));
  CHECK_FALSE(CheckpointEveryNth<3>::checkpointed(1));
  CHECK_FALSE(CheckpointEveryNth<3>::checkpointed(2));
  CHECK(CheckpointEveryNth<3>::checkpointed(3));
}
