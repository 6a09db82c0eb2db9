// Fp32 ("32-true"): the reference the other precisions are held to. Its numerics are cross-checked against
// an independent PyTorch implementation in tests/reference/.
#include <catch2/catch.hpp>

#include <cmath>

#include "support.hpp"
#include "tessera/tessera.hpp"

using namespace tessera;
using testing::first_loss;
using testing::quiet;
using testing::small_run;

TEST_CASE("fp32 stores everything in fp32 and starts at the uniform-guess loss", "[precision]") {
  STATIC_REQUIRE(Fp32::param_dtype == c10::ScalarType::Float);
  STATIC_REQUIRE(Fp32::compute_dtype == c10::ScalarType::Float);
  STATIC_REQUIRE(Fp32::optim_state_dtype == c10::ScalarType::Float);
  STATIC_REQUIRE_FALSE(Fp32::loss_scaling);
  // With N(0, 0.02) weights the logits are near zero: the loss is close to ln(vocab_size).
  CHECK(first_loss<Fp32>() == Approx(std::log(4096.0)).epsilon(0.01));
}
