// Bf16Mixed ("bf16-mixed"): fp32 master parameters and state, bf16 compute.
#include <catch2/catch.hpp>

#include <cmath>

#include "support.hpp"
#include "tessera/tessera.hpp"

using namespace tessera;
using testing::first_loss;
using testing::quiet;
using testing::small_run;

TEST_CASE("bf16-mixed keeps fp32 masters and computes in bf16", "[precision]") {
  STATIC_REQUIRE(Bf16Mixed::param_dtype == c10::ScalarType::Float);
  STATIC_REQUIRE(Bf16Mixed::compute_dtype == c10::ScalarType::BFloat16);
  STATIC_REQUIRE(Bf16Mixed::optim_state_dtype == c10::ScalarType::Float);
  Trainer<Experiment<models::Llama, Bf16Mixed>> t(small_run(), quiet());
  t.accumulate_gradients(0);
  CHECK(t.flat_grad(1).scalar_type() == c10::ScalarType::Float);
  const double mixed = t.flat_grad(1).abs().sum().item<double>();
  CHECK(std::isfinite(mixed));
  CHECK(mixed > 0);
}

TEST_CASE("bf16-mixed trains close to fp32", "[precision]") {
  CHECK(first_loss<Bf16Mixed>() == Approx(first_loss<Fp32>()).epsilon(0.02));
}
