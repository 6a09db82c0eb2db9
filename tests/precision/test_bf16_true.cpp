// Bf16True ("bf16-true"): parameters, gradients and optimizer state all in bf16.
#include <catch2/catch.hpp>

#include <cmath>

#include "support.hpp"
#include "tessera/tessera.hpp"

using namespace tessera;
using testing::first_loss;
using testing::quiet;
using testing::small_run;

TEST_CASE("bf16-true stores parameters, gradients and optimizer state in bf16", "[precision]") {
  STATIC_REQUIRE(Bf16True::param_dtype == c10::ScalarType::BFloat16);
  STATIC_REQUIRE(Bf16True::optim_state_dtype == c10::ScalarType::BFloat16);
  Trainer<Experiment<models::Llama, Bf16True>> t(small_run(), quiet());
  CHECK(t.params().flat_param(0).scalar_type() == c10::ScalarType::BFloat16);
  t.accumulate_gradients(0);
  CHECK(t.flat_grad(1).scalar_type() == c10::ScalarType::BFloat16);
}

TEST_CASE("bf16-true trains close to fp32", "[precision]") {
  // bf16 keeps 8 mantissa bits: a relative error of a few 1e-3 per op, well inside 2% on the loss.
  CHECK(first_loss<Bf16True>() == Approx(first_loss<Fp32>()).epsilon(0.02));
}
