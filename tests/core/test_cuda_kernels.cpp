// LibTorch's CUDA kernels, loaded at program start where a CUDA driver is installed (core/cuda_kernels.hpp): what
// cuda_kernels() reports is what the process holds -- libtorch_cuda.so in memory, CUDA kernels registered for ATen's
// operators (the dispatcher's entry of aten::add.Tensor), ATen's CUDA hooks those of the library -- and what
// TESSERA_CUDA_KERNELS asked for. ctest runs this file as it is (auto: no driver on a CPU machine, so nothing is
// loaded there) and again with TESSERA_CUDA_KERNELS=load (unit.core.test_cuda_kernels.load) and =skip (.skip).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "tessera/core/cuda_kernels.hpp"

namespace {

bool cuda_kernel_registered() {
  const auto op = c10::Dispatcher::singleton().findOp(c10::OperatorName("aten::add", "Tensor"));
  REQUIRE(op.has_value());
  return op->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
}

bool torch_cuda_in_process() { return dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD) != nullptr; }

}  // namespace

TEST_CASE("cuda_kernels() reports what the process holds, as TESSERA_CUDA_KERNELS asked", "[core][cuda_kernels]") {
  const tessera::CudaKernels& k = tessera::cuda_kernels();
  INFO(k.reason);
  CHECK_FALSE(k.reason.empty());
  CHECK(&k == &tessera::cuda_kernels());  // loaded once
#ifdef TESSERA_TEST_WITH_CUDA
  CHECK(k.loaded == torch_cuda_in_process());
  CHECK(k.loaded == cuda_kernel_registered());
  // ATen's CUDA hooks (behind at::hasCUDA()) are fixed at their first use: the loaded library's, not the stub's.
  CHECK(k.loaded == at::detail::getCUDAHooks().isBuilt());
  const char* setting = std::getenv("TESSERA_CUDA_KERNELS");
  const std::string want = setting ? setting : "auto";
  if (want == "load") {
    CHECK(k.loaded);
  } else if (want == "skip") {
    CHECK_FALSE(k.loaded);
    CHECK(k.reason.find("TESSERA_CUDA_KERNELS=skip") != std::string::npos);
  } else {
    const bool driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
    CHECK(k.loaded == driver);
    if (!driver) CHECK(k.reason.find("no CUDA driver is installed") != std::string::npos);
  }
#else
  CHECK_FALSE(k.loaded);
  CHECK_FALSE(cuda_kernel_registered());
#endif
}
