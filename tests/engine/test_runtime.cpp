// choose_gemm: which runs widen their matrix products (engine/runtime.hpp): only bf16/fp16 on a CPU (or a dry run
// of one), as cpu_lowp= says, auto following ops::cpu_lowp_support; make_runtime sets CUDA's fp32 precision as tf32=
// says.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include <ATen/Context.h>

#include "tessera/engine/runtime.hpp"
#include "tessera/ops/cpu_lowp.hpp"

using namespace tessera;
using tessera::ops::Lowp;

TEST_CASE("choose_gemm widens 16-bit CPU products as cpu_lowp says, and nothing else", "[engine]") {
  const c10::Device cpu(c10::kCPU), cuda(c10::kCUDA, 0);
  for (const c10::ScalarType t : {at::kBFloat16, at::kHalf}) {
    INFO(c10::toString(t));
    CHECK(choose_gemm(CpuLowp::widen, t, cpu).gemm.lowp == Lowp::widen);
    CHECK_THAT(choose_gemm(CpuLowp::widen, t, cpu).reason, Catch::Contains("cpu_lowp=widen"));
    CHECK(choose_gemm(CpuLowp::native, t, cpu).gemm.lowp == Lowp::native);
    const ops::CpuLowpSupport support = ops::cpu_lowp_support(t);
    const GemmChoice automatic = choose_gemm(CpuLowp::auto_, t, cpu);
    CHECK(automatic.gemm.lowp == (support.native ? Lowp::native : Lowp::widen));
    CHECK_THAT(automatic.reason, Catch::Contains("cpu_lowp=auto: " + support.reason));
    // Another device, or fp32: the setting changes nothing and the experiment table says nothing.
    const GemmChoice gpu = choose_gemm(CpuLowp::widen, t, cuda);
    CHECK(gpu.gemm.lowp == Lowp::native);
    CHECK(gpu.reason.empty());
  }
  CHECK(choose_gemm(CpuLowp::widen, at::kFloat, cpu).gemm.lowp == Lowp::native);
  CHECK(choose_gemm(CpuLowp::widen, at::kFloat, cpu).reason.empty());
}

TEST_CASE("choose_gemm in a dry run follows the run it predicts", "[engine]") {
  const c10::Device meta(c10::kMeta);
  {
    const DryRunScope cpu_run(0, 1, 1, c10::kCPU);
    CHECK(choose_gemm(CpuLowp::widen, at::kBFloat16, meta).gemm.lowp == Lowp::widen);
  }
  const DryRunScope gpu_run(0, 1, 1, c10::kCUDA);
  CHECK(choose_gemm(CpuLowp::widen, at::kBFloat16, meta).gemm.lowp == Lowp::native);
}

TEST_CASE("choose_gemm blocks the language models' loss as loss_blocks says, auto on a GPU only", "[engine]") {
  const c10::Device cpu(c10::kCPU), cuda(c10::kCUDA, 0), meta(c10::kMeta);
  for (const c10::ScalarType t : {at::kFloat, at::kBFloat16}) {
    INFO(c10::toString(t));
    CHECK(choose_gemm(CpuLowp::auto_, t, cpu, LossBlocks::on).gemm.loss_block_bytes == ops::kLossBlockBytes);
    CHECK(choose_gemm(CpuLowp::auto_, t, cuda, LossBlocks::off).gemm.loss_block_bytes == 0);
    CHECK(choose_gemm(CpuLowp::auto_, t, cpu, LossBlocks::auto_).gemm.loss_block_bytes == 0);
    CHECK(choose_gemm(CpuLowp::auto_, t, cuda, LossBlocks::auto_).gemm.loss_block_bytes == ops::kLossBlockBytes);
    // cpu_lowp's choice stands beside it.
    CHECK(choose_gemm(CpuLowp::widen, at::kBFloat16, cpu, LossBlocks::on).gemm.lowp == Lowp::widen);
  }
  {
    const DryRunScope cpu_run(0, 1, 1, c10::kCPU);
    CHECK(choose_gemm(CpuLowp::auto_, at::kFloat, meta, LossBlocks::auto_).gemm.loss_block_bytes == 0);
  }
  const DryRunScope gpu_run(0, 1, 1, c10::kCUDA);
  CHECK(choose_gemm(CpuLowp::auto_, at::kFloat, meta, LossBlocks::auto_).gemm.loss_block_bytes == ops::kLossBlockBytes);
}

TEST_CASE("make_runtime sets CUDA's fp32 matmul and convolution precision as tf32 says, default leaves it",
          "[engine]") {
  auto& context = at::globalContext();
  const bool matmul = context.allowTF32CuBLAS(), conv = context.allowTF32CuDNN();
  RunConfig cfg;
  cfg.device = "cpu";
  cfg.threads = 1;
  cfg.tf32 = Tf32::on;
  make_runtime(cfg);
  CHECK(context.allowTF32CuBLAS());
  CHECK(context.allowTF32CuDNN());
  cfg.tf32 = Tf32::off;
  make_runtime(cfg);
  CHECK_FALSE(context.allowTF32CuBLAS());
  CHECK_FALSE(context.allowTF32CuDNN());
  cfg.tf32 = Tf32::default_;
  make_runtime(cfg);
  CHECK_FALSE(context.allowTF32CuDNN());  // as the run before left it
  context.setFloat32MatmulPrecision(matmul ? "high" : "highest");
  context.setAllowTF32CuDNN(conv);
}
