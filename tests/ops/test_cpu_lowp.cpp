// ops::cpu_lowp_support against /proc/cpuinfo's flags (a second source for what LibTorch's cpuinfo reports), and
// the environment limits on LibTorch's kernels that make the native 16-bit path slow on any CPU.
// LibTorch before Catch2: glog's CHECK (pulled in by c10) must not replace Catch2's when built without the PCH.
#include <ATen/ATen.h>
#include <ATen/Version.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/ops/cpu_lowp.hpp"

#include <catch2/catch.hpp>

using tessera::ops::cpu_lowp_support;

namespace {

// The flags of the first processor in /proc/cpuinfo (nullopt where there is none: not Linux, not x86).
std::optional<std::set<std::string>> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> flags;
      for (std::string w; words >> w;) flags.insert(w);
      return flags;
    }
  return std::nullopt;
}

// Sets an environment variable for a scope, restoring what it was.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("cpu_lowp_support says native exactly where /proc/cpuinfo lists the 16-bit instructions", "[ops]") {
  const auto flags = cpuinfo_flags();
#if !defined(__x86_64__)
  WARN("not an x86-64 CPU: nothing to compare");
  return;
#endif
  if (!flags) {
    WARN("no /proc/cpuinfo flags: nothing to compare");
    return;
  }
  // Unlimited kernels only: ATEN_CPU_CAPABILITY is read once per process; ONEDNN_MAX_CPU_ISA is cleared here.
  if (at::get_cpu_capability() != "AVX512" && flags->count("avx512f")) {
    WARN("ATEN_CPU_CAPABILITY limits this process's kernels: nothing to compare");
    return;
  }
  const char* onednn = std::getenv("ONEDNN_MAX_CPU_ISA");
  const std::string saved = onednn ? onednn : "";
  ::unsetenv("ONEDNN_MAX_CPU_ISA");
  const bool bf16 = flags->count("avx512_bf16") || flags->count("amx_bf16");
  const bool fp16 = flags->count("avx512_fp16") || flags->count("amx_fp16");
  const auto b = cpu_lowp_support(at::kBFloat16), h = cpu_lowp_support(at::kHalf);
  if (onednn) ::setenv("ONEDNN_MAX_CPU_ISA", saved.c_str(), 1);
  CHECK(b.native == bf16);
  CHECK(h.native == fp16);
  CHECK_THAT(b.reason, Catch::Contains(bf16 ? "this CPU has" : "this CPU lacks avx512_bf16 and amx_bf16"));
  CHECK_THAT(h.reason, Catch::Contains(fp16 ? "this CPU has" : "this CPU lacks avx512_fp16 and amx_fp16"));
}

TEST_CASE("cpu_lowp_support: ONEDNN_MAX_CPU_ISA below the 16-bit ISAs counts as their absence", "[ops]") {
  {
    const ScopedEnv limit("ONEDNN_MAX_CPU_ISA", "AVX2");
    const auto b = cpu_lowp_support(at::kBFloat16);
    CHECK_FALSE(b.native);
    if (b.reason.find("this CPU has") != std::string::npos && b.reason.find("ATEN_CPU_CAPABILITY") == std::string::npos)
      CHECK_THAT(b.reason, Catch::Contains("ONEDNN_MAX_CPU_ISA=AVX2"));
  }
  {
    const ScopedEnv all("ONEDNN_MAX_CPU_ISA", "ALL");
    CHECK_THAT(cpu_lowp_support(at::kBFloat16).reason, !Catch::Contains("ONEDNN_MAX_CPU_ISA"));
  }
}

TEST_CASE("cpu_lowp_support refuses a dtype that is not 16-bit, naming it", "[ops]") {
  CHECK_THROWS_AS(cpu_lowp_support(at::kFloat), tessera::Error);
  CHECK_THROWS_WITH(cpu_lowp_support(at::kFloat), Catch::Contains("Float") && Catch::Contains("bf16 or fp16"));
}
