// implements: cpu_lowp_support (ops/cpu_lowp.hpp), from LibTorch's cpuinfo-backed capability map and the two
// environment variables that limit LibTorch's CPU kernels.
#include "tessera/ops/cpu_lowp.hpp"

#include <ATen/Version.h>
#include <ATen/cpu/Utils.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "tessera/core/error.hpp"

namespace tessera::ops {
namespace {

bool has(const std::unordered_map<std::string, c10::IValue>& caps, const std::string& key) {
  const auto it = caps.find(key);
  return it != caps.end() && it->second.isBool() && it->second.toBool();
}

// ONEDNN_MAX_CPU_ISA (or its older name DNNL_MAX_CPU_ISA) set to an ISA without the 16-bit instructions: oneDNN's
// names of the ISAs that have them (bf16: avx512_core_bf16 and up; fp16: avx512_core_fp16 and up), or ALL/DEFAULT.
std::string onednn_limit(c10::ScalarType dtype) {
  const char* raw = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!raw) raw = std::getenv("DNNL_MAX_CPU_ISA");
  if (!raw || !*raw) return {};
  std::string isa(raw);
  std::transform(isa.begin(), isa.end(), isa.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (isa == "all" || isa == "default" || isa.find("amx") != std::string::npos || isa.find("avx10") != std::string::npos)
    return {};
  if (dtype == at::kBFloat16 && (isa == "avx512_core_bf16" || isa == "avx512_core_fp16" || isa == "avx2_vnni_2"))
    return {};
  if (dtype == at::kHalf && (isa == "avx512_core_fp16" || isa == "avx2_vnni_2")) return {};
  return std::string("ONEDNN_MAX_CPU_ISA=") + raw;
}

}  // namespace

CpuLowpSupport cpu_lowp_support(c10::ScalarType dtype) {
  if (dtype != at::kBFloat16 && dtype != at::kHalf)
    throw Error(std::string("cpu_lowp_support: dtype ") + c10::toString(dtype) + " is not bf16 or fp16");
#if defined(__x86_64__) || defined(_M_X64)
  const bool bf16 = dtype == at::kBFloat16;
  const std::array<std::string, 2> wanted = bf16 ? std::array<std::string, 2>{"avx512_bf16", "amx_bf16"}
                                                 : std::array<std::string, 2>{"avx512_fp16", "amx_fp16"};
  const auto caps = at::cpu::get_cpu_capabilities();
  std::string found;
  for (const std::string& key : wanted)
    if (has(caps, key)) found += (found.empty() ? "" : ", ") + key;
  if (found.empty()) return {false, "this CPU lacks " + wanted[0] + " and " + wanted[1]};
  // "AVX512", "AVX2" or "DEFAULT": the kernels ATen picked, below this CPU's when ATEN_CPU_CAPABILITY says so.
  if (const std::string kernels = at::get_cpu_capability(); kernels != "AVX512")
    return {false, "this CPU has " + found + " but ATEN_CPU_CAPABILITY limits LibTorch's kernels to " + kernels};
  if (std::string limit = onednn_limit(dtype); !limit.empty())
    return {false, "this CPU has " + found + " but " + limit + " keeps oneDNN from it"};
  return {true, "this CPU has " + found};
#else
  (void)dtype;
  return {true, "not an x86-64 CPU: LibTorch's own 16-bit kernels"};
#endif
}

}  // namespace tessera::ops
