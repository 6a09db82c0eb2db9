#pragma once
// defines: tessera::optim::cpu_adamw_step, AdamW fused into one vectorized, multi-threaded pass over CPU memory
// (as DeepSpeed's DeepSpeedCPUAdam), for the optimizer offload: reads p, g, m, v and writes p, m, v and,
// optionally, the updated parameter cast for the device, where torch's AdamW makes ~9 passes and 2 temporaries.
// Same update as tessera::AdamW (torch.optim.AdamW, decoupled weight decay):
//   g <- g * grad_scale ;  p <- p * (1 - lr*wd)
//   m <- b1*m + (1-b1)*g ;  v <- b2*v + (1-b2)*g^2
//   p <- p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// One kernel per instruction set (AVX-512, AVX2 with FMA and F16C, portable scalar), picked at run time: the widest
// this CPU has, or the one the environment variable TESSERA_CPU_ISA names (avx512, avx2 or scalar; for tests and
// benchmarks). Every instruction set and every thread count gives the same bits, in either rounding order below.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>

namespace tessera::optim {

// How each element's update rounds. Either order gives the same bits on every instruction set and thread count.
enum class CpuAdamWOrder {
  // torch's AdamW ops in their order, each rounded on its own: p*(1-lr wd) + (-lr/bc1 * m) / (sqrt(v)/sqrt(bc2) + eps),
  // m = m*b1 + (1-b1)*g, v = v*b2 + ((1-b2)*g)*g: two divisions and a square root per element, no FMA. Equals ATen's
  // elementwise ops with an IEEE square root bit for bit; torch's own AdamW differs in the last bit here and there
  // (its FMA in add_ or lerp_, and a float sqrt that is not IEEE's).
  // The default: the step is memory-bound, and measured no slower than `fused` (AMD EPYC Zen 5, 2 threads, ~25 ms
  // per 100M parameters, AVX-512 and AVX2 kernels alike, bench/cpu_adamw), while tessera's checks against
  // transformers + torch.optim (tests/TesseraTestReference*.cmake) have their tolerances set on these numerics.
  torch_ops,
  // Bias corrections folded into scalars and fused multiply-adds, as DeepSpeed's kernel: m = fma(m, b1, (1-b1)*g),
  // v = fma(v, b2, ((1-b2)*g)*g), p = fma(p, 1-lr wd, -lr/bc1 * (m / fma(sqrt(v), 1/sqrt(bc2), eps))): one
  // division and a square root per element, ~15-25% fewer cycles where the step is compute-bound (cache-resident
  // on that CPU: 0.30 against 0.36 cycles per element with AVX-512, 0.61 against 0.79 with AVX2); for CPUs with
  // slow dividers and much memory bandwidth per core. Within ~1e-7 relative of torch_ops per step.
  fused,
};

struct CpuAdamWHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  std::int64_t step = 1;    // 1-based step count after this update (bias correction)
  double grad_scale = 1.0;  // gradients are multiplied by this first (loss-scale unscaling)
  CpuAdamWOrder order = CpuAdamWOrder::torch_ops;
};

// One AdamW step in one pass over memory, on torch's intra-op threads (at::get_num_threads()).
// param, exp_avg, exp_avg_sq: contiguous fp32 CPU tensors of n elements; grad: contiguous CPU fp32, bf16 or
// fp16, n elements (shapes may differ, only the element count must agree). If param_out is non-null it is a
// contiguous CPU tensor of n elements (fp32, bf16 or fp16), not overlapping param, that receives the updated
// param cast to its dtype (round to nearest even, as Tensor::to) in the same pass.
// Throws tessera::Error on a wrong dtype, device, layout or size, naming the tensor and the fix, and on a
// TESSERA_CPU_ISA this CPU cannot run (see cpu_adamw_isa).
void cpu_adamw_step(at::Tensor& param, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, const at::Tensor& grad,
                    const CpuAdamWHyper& hyper, at::Tensor* param_out = nullptr);

// The instruction set cpu_adamw_step runs with now: "avx512", "avx2" or "scalar". TESSERA_CPU_ISA if it is set
// (read at every call), else cpu_adamw_widest_isa(). Throws tessera::Error if TESSERA_CPU_ISA names another set
// or one this CPU lacks, with the value and the sets allowed here.
std::string_view cpu_adamw_isa();

// The widest instruction set this CPU (and its OS) supports, whatever TESSERA_CPU_ISA says.
std::string_view cpu_adamw_widest_isa();

}  // namespace tessera::optim
