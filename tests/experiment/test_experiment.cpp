// Experiment<>: order-free policy lists with defaults. Misuse is in tests/compile_fail/.
#include <catch2/catch.hpp>

#include "tessera/tessera.hpp"

using namespace tessera;
using models::Llama;

TEST_CASE("policy order does not matter and omitted axes take defaults", "[experiment]") {
  STATIC_REQUIRE(std::is_same_v<Experiment<Llama, Bf16Mixed, CheckpointEveryBlock, Sgd>,
                                Experiment<Llama, Sgd, CheckpointEveryBlock, Bf16Mixed>>);
  STATIC_REQUIRE(std::is_same_v<Experiment<Llama, Bf16Mixed, Sgd>, Experiment<Llama, Sgd, Bf16Mixed>>);
  using Defaults = Experiment<Llama>;
  STATIC_REQUIRE(std::is_same_v<Defaults::sharding, NoShard>);
  STATIC_REQUIRE(std::is_same_v<Defaults::precision, Fp32>);
  STATIC_REQUIRE(std::is_same_v<Defaults::checkpointing, NoCheckpoint>);
  STATIC_REQUIRE(std::is_same_v<Defaults::optimizer, AdamW>);
  STATIC_REQUIRE(std::is_same_v<Defaults::offload, NoOffload>);
  STATIC_REQUIRE(std::is_same_v<Defaults::adapter, NoAdapter>);
  STATIC_REQUIRE(std::is_same_v<Defaults, Experiment<Llama, NoShard, Fp32, NoCheckpoint, AdamW, NoOffload, NoAdapter>>);
  STATIC_REQUIRE(std::is_same_v<Experiment<Llama, OffloadParams, Bf16True, FullShard, Adam8bit>,
                                Experiment<Llama, Adam8bit, FullShard, Bf16True, OffloadParams>>);
  STATIC_REQUIRE(std::is_same_v<Experiment<Llama, QLora, Ddp, Bf16Mixed>::adapter, QLora>);
  STATIC_REQUIRE(std::is_same_v<Experiment<Llama, Lora, CheckpointEveryBlock>,
                                Experiment<Llama, CheckpointEveryBlock, Lora>>);
  STATIC_REQUIRE_FALSE(std::is_same_v<Experiment<Llama, Bf16Mixed>, Experiment<Llama, Bf16True>>);
}

TEST_CASE("policies satisfy their axis concepts", "[experiment]") {
  STATIC_REQUIRE(PrecisionPolicy<Fp32>);
  STATIC_REQUIRE(PrecisionPolicy<Bf16True>);
  STATIC_REQUIRE(PrecisionPolicy<Bf16Mixed>);
  STATIC_REQUIRE(PrecisionPolicy<Fp16Mixed>);
  STATIC_REQUIRE(OptimizerPolicy<AdamW>);
  STATIC_REQUIRE(OptimizerPolicy<Sgd>);
  STATIC_REQUIRE(OptimizerPolicy<Adam8bit>);
  STATIC_REQUIRE(SegmentAwareOptimizer<Adam8bit>);
  STATIC_REQUIRE(CpuFusedOptimizer<AdamW>);
  STATIC_REQUIRE_FALSE(CpuFusedOptimizer<Sgd>);
  STATIC_REQUIRE(ShardingPolicy<NoShard>);
  STATIC_REQUIRE(OffloadPolicy<NoOffload>);
  STATIC_REQUIRE(OffloadPolicy<OffloadOptimizer>);
  STATIC_REQUIRE(OffloadPolicy<OffloadParams>);
  STATIC_REQUIRE(AdapterPolicy<NoAdapter>);
  STATIC_REQUIRE(AdapterPolicy<Lora>);
  STATIC_REQUIRE(AdapterPolicy<QLora>);
  STATIC_REQUIRE(AdapterPolicy<QLoraT<false>>);
  STATIC_REQUIRE_FALSE(OffloadPolicy<Lora>);
  STATIC_REQUIRE(models::ModelFamily<Llama>);
  STATIC_REQUIRE_FALSE(PrecisionPolicy<AdamW>);
  STATIC_REQUIRE_FALSE(Policy<Llama>);
}
