#pragma once
// defines: tessera::optim::cpu_adamw_step, AdamW fused into one vectorized, multi-threaded pass over CPU memory
// (as DeepSpeed's DeepSpeedCPUAdam), for the optimizer offload: reads p, g, m, v and writes p, m, v and,
// optionally, the updated parameter cast for the device, where torch's AdamW makes ~9 passes and 2 temporaries.
// Same update as tessera::AdamW (torch.optim.AdamW, decoupled weight decay):
//   g <- g * grad_scale ;  p <- p * (1 - lr*wd)
//   m <- b1*m + (1-b1)*g ;  v <- b2*v + (1-b2)*g^2
//   p <- p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tessera::optim {

struct CpuAdamWHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  std::int64_t step = 1;    // 1-based step count after this update (bias correction)
  double grad_scale = 1.0;  // gradients are multiplied by this first (loss-scale unscaling)
};

// One AdamW step in one pass over memory, on torch's intra-op threads (at::get_num_threads()).
// param, exp_avg, exp_avg_sq: contiguous fp32 CPU tensors of n elements; grad: contiguous CPU fp32, bf16 or
// fp16, n elements (shapes may differ, only the element count must agree). If param_out is non-null it is a
// contiguous CPU tensor of n elements (fp32, bf16 or fp16), not overlapping param, that receives the updated
// param cast to its dtype (round to nearest even, as Tensor::to) in the same pass.
// Throws tessera::Error on a wrong dtype, device, layout or size, naming the tensor and the fix.
void cpu_adamw_step(at::Tensor& param, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, const at::Tensor& grad,
                    const CpuAdamWHyper& hyper, at::Tensor* param_out = nullptr);

}  // namespace tessera::optim
