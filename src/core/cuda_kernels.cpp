#include "tessera/core/cuda_kernels.hpp"

#include <ATen/Context.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace tessera {

namespace {

enum class Want { auto_, load, skip };

Want wanted() {
  const char* value = std::getenv("TESSERA_CUDA_KERNELS");
  const std::string_view v = value ? value : "";
  if (v.empty() || v == "auto") return Want::auto_;
  if (v == "load") return Want::load;
  if (v == "skip") return Want::skip;
  std::fprintf(stderr,
               "tessera: TESSERA_CUDA_KERNELS=%s is not a setting; say auto (load LibTorch's CUDA kernels where a "
               "CUDA driver is installed, the default), load or skip, or leave it unset\n",
               value);
  std::exit(2);
}

// The directory of libtorch_cpu.so as this process loaded it: libtorch_cuda.so sits beside it in every LibTorch.
std::filesystem::path torch_lib_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&at::globalContext), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

CudaKernels load() {
  CudaKernels out;
  const Want want = wanted();
  if (dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD) != nullptr) {  // the program links it itself
    out.loaded = true;
    out.reason = "libtorch_cuda.so was linked by the program";
    return out;
  }
  if (want == Want::skip) {
    out.reason = "LibTorch's CUDA kernels were not loaded (TESSERA_CUDA_KERNELS=skip)";
    return out;
  }
  const std::filesystem::path library = torch_lib_dir() / "libtorch_cuda.so";
  std::error_code ignored;
  if (!std::filesystem::exists(library, ignored)) {
    out.reason = "this LibTorch has no CUDA kernels (no " + library.string() + ")";
    if (want == Want::auto_) return out;
  } else if (want == Want::auto_ && dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == nullptr) {
    out.reason = "no CUDA driver is installed (libcuda.so.1 does not load), so LibTorch's CUDA kernels were not "
                 "loaded";
    return out;
  } else if (dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* error = dlerror();
    out.reason = "LibTorch's CUDA kernels (" + library.string() + ") did not load: " + (error ? error : "unknown");
  } else {
    out.loaded = true;
    out.reason = "LibTorch's CUDA kernels were loaded from " + library.string();
    return out;
  }
  // Asked for (load), or a driver is here but the kernels are not: say so once, on stderr.
  std::fprintf(stderr, "tessera: %s; this process runs on the CPU only%s\n", out.reason.c_str(),
               want == Want::load ? " (TESSERA_CUDA_KERNELS=load: exit code 2)" : "");
  if (want == Want::load) std::exit(2);
  return out;
}

}  // namespace

const CudaKernels& cuda_kernels() {
  static const CudaKernels outcome = load();
  return outcome;
}

}  // namespace tessera

// The link option --undefined=tessera_cuda_kernels_loader (cmake/TesseraDependencies.cmake) pulls this file out of
// libtessera.a into every program, and with it the static constructor below: the load before main().
extern "C" {
extern const bool tessera_cuda_kernels_loader;
const bool tessera_cuda_kernels_loader = tessera::cuda_kernels().loaded;
}
