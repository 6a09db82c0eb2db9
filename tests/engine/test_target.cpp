// engine/target.hpp: kernel_target names a tensor's own device, and a dry run's target for meta tensors; with a CUDA
// target the fused RMSNorm that models/llama.cpp calls saves on meta tensors what its CUDA autograd node saves.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include <string>
#include <tuple>

#include "tessera/engine/job.hpp"
#include "tessera/engine/target.hpp"
#include "tessera/predict/dry_run.hpp"

using namespace tessera;

TEST_CASE("kernel_target: a tensor's device, and a dry run's target for meta tensors", "[engine]") {
  const at::Tensor cpu = at::zeros({2});
  const at::Tensor meta = at::empty({2}, at::TensorOptions().device(at::kMeta));
  CHECK(kernel_target(cpu) == c10::DeviceType::CPU);
  CHECK(kernel_target(meta) == c10::DeviceType::Meta);
  {
    const DryRunScope scope(0, 1, 1, c10::DeviceType::CUDA);
    CHECK(kernel_target(meta) == c10::DeviceType::CUDA);
    CHECK(kernel_target(cpu) == c10::DeviceType::CPU);  // a real tensor is where it is
  }
  {
    const DryRunScope scope(0, 2, 2, c10::DeviceType::CPU);
    CHECK(kernel_target(meta) == c10::DeviceType::CPU);
  }
  CHECK(kernel_target(meta) == c10::DeviceType::Meta);
}

TEST_CASE("Fused RMSNorm on meta tensors for a CUDA target saves the input and 1/rms, as CUDA's node does", "[engine]") {
  predict::register_meta_kernels();
  const at::Tensor x =
      at::empty({4, 8, 16}, at::TensorOptions().device(at::kMeta).dtype(at::kBFloat16)).requires_grad_(true);
  {
    const DryRunScope scope(0, 1, 1, c10::DeviceType::CUDA);
    const auto [y, rstd] = at::_fused_rms_norm(x, {16}, std::nullopt, 1e-5);
    CHECK(y.sizes() == x.sizes());
    CHECK(y.scalar_type() == at::kBFloat16);
    CHECK(rstd.sizes() == c10::IntArrayRef({4, 8, 1}));
    CHECK(rstd.scalar_type() == at::kFloat);
    REQUIRE(y.grad_fn());
    // LibTorch's own meta path decomposes it: an fp32 copy of x (ToCopyBackward0) would be saved instead.
    CHECK(y.grad_fn()->name().find("FusedRmsNormOnMeta") != std::string::npos);
    y.sum().backward();
    REQUIRE(x.grad().defined());
    CHECK(x.grad().sizes() == x.sizes());
    CHECK(x.grad().scalar_type() == at::kBFloat16);
  }
  {
    // A CPU target's program never calls it (models/llama.cpp takes the op-by-op form there).
    const DryRunScope scope(0, 1, 1, c10::DeviceType::CPU);
    CHECK_THROWS_WITH(at::_fused_rms_norm(x, {16}, std::nullopt, 1e-5), Catch::Contains("CUDA targets only"));
  }
}
