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

TEST_CASE("CheckpointEveryNth names its N", "[checkpoint]") {
  STATIC_REQUIRE(CheckpointEveryBlock::name == "every block");
  STATIC_REQUIRE(CheckpointEveryNth<2>::name == "every 2nd block (blocks 0, 2, 4, ...)");
  STATIC_REQUIRE(CheckpointEveryNth<3>::name == "every 3rd block (blocks 0, 3, 6, ...)");
  STATIC_REQUIRE(CheckpointEveryNth<4>::name == "every 4th block (blocks 0, 4, 8, ...)");
  STATIC_REQUIRE(CheckpointEveryNth<11>::name == "every 11th block (blocks 0, 11, 22, ...)");
  STATIC_REQUIRE(CheckpointEveryNth<21>::name == "every 21st block (blocks 0, 21, 42, ...)");
}
