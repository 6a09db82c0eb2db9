#pragma once
// defines: tessera::cuda_kernels(), whether LibTorch's CUDA kernels are loaded in this process, and why (not).
//
// tessera links LibTorch's CPU library (libtorch_cpu.so) and the CUDA runtime pieces it calls itself (libc10_cuda.so,
// libcudart), but not libtorch_cuda.so: no symbol of it is called, and loading it costs every process about a third
// of a second and ~350 MB of resident memory for its kernels' registration, which a machine without a GPU never uses
// (tests and CPU runs start hundreds of processes). libtessera loads it instead, before main(), where a CUDA driver
// is installed (libcuda.so.1 loads), from the directory libtorch_cpu.so was loaded from, with RTLD_GLOBAL: its static
// constructors register the CUDA kernels and at::hasCUDA()'s hooks as linking it would have. (ATen fixes its CUDA
// hooks at their first use, so the load comes first: a static constructor of this file, which every program linking
// tessera::tessera contains through the link option --undefined=tessera_cuda_kernels_loader of cmake/
// TesseraDependencies.cmake.)
//
// TESSERA_CUDA_KERNELS=auto (unset: the same) | load (always, even without a driver; a failure ends the process
// with exit code 2) | skip (never: a CPU-only process on a GPU machine). Any other value ends the process with
// exit code 2 and a message naming it. A LibTorch without libtorch_cuda.so (a CPU build) has nothing to load, and
// its programs do not link the loader.
#include <string>

namespace tessera {

struct CudaKernels {
  bool loaded = false;  // libtorch_cuda.so is in this process (loaded here, or linked by the program itself)
  std::string reason;   // one line: what was loaded from where, or why nothing was
};

// The outcome of the load at program start (it happens at most once).
const CudaKernels& cuda_kernels();

}  // namespace tessera
