#pragma once
// defines: tessera::optim::fused_adamw_step, AdamW's update (optim/adamw.hpp) through ATen's fused kernel, the one
// torch.optim.AdamW(fused=True) runs: one pass over p, g, m, v with the arithmetic in fp32 whatever their dtype, no
// temporaries. AdamW::step takes it on CUDA when p, g, m and v share a dtype (a dry run for CUDA too: it allocates
// nothing); ATen also has the kernel on the CPU, where the tests check it against torch::optim::AdamW.
#include <ATen/core/Tensor.h>

#include "tessera/optim/adamw.hpp"

namespace tessera::optim {

// One step: state.steps += 1, then p, m, v updated in place (p, g, m, v: one dtype, one device, contiguous).
void fused_adamw_step(AdamW::State& state, at::Tensor& flat_param, const at::Tensor& flat_grad, const StepHyper& hyper);

}  // namespace tessera::optim
