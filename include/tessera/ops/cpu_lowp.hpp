#pragma once
// defines: cpu_lowp_support, whether this CPU runs LibTorch's 16-bit (bf16, fp16) matrix products natively.
// Without the instructions (x86: avx512_bf16 or amx_bf16 for bf16, avx512_fp16 or amx_fp16 for fp16), oneDNN has
// no fast 16-bit GEMM and ATen falls back to a scalar loop ~40-130x slower than its fp32 GEMM; tessera then widens
// the operands to fp32 instead (ops/gemm.hpp). Asked of LibTorch's own CPU query (cpuinfo), and of the limits a
// user put on LibTorch's kernels: ATEN_CPU_CAPABILITY below avx512 and ONEDNN_MAX_CPU_ISA below the 16-bit ISAs
// make the native path slow on any CPU, so they count as the instructions' absence.
#include <c10/core/ScalarType.h>

#include <string>

namespace tessera::ops {

struct CpuLowpSupport {
  bool native = false;  // LibTorch has fast 16-bit GEMMs of this dtype on this CPU
  std::string reason;   // why, for the experiment table: "this CPU has avx512_bf16", "... lacks avx512_fp16, amx_fp16"
};

// For bf16 or fp16 (Error for another dtype). Not on x86-64: native (LibTorch's kernels are all there is).
CpuLowpSupport cpu_lowp_support(c10::ScalarType dtype);

}  // namespace tessera::ops
