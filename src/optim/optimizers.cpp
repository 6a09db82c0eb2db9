// The update rules of the built-in optimizer policies, on flat 1-D buffers (one call per unit).
#include <ATen/ATen.h>
#include <ATen/ops/_fused_adamw.h>

#include <cmath>

#include "tessera/optim/adamw.hpp"
#include "tessera/optim/cpu_adamw.hpp"
#include "tessera/optim/fused_adamw.hpp"
#include "tessera/engine/target.hpp"
#include "tessera/optim/sgd.hpp"

namespace tessera {

AdamW::State AdamW::init(const at::Tensor& flat_param, c10::ScalarType state_dtype) {
  auto options = flat_param.options().dtype(state_dtype);
  return State{at::zeros(flat_param.sizes(), options), at::zeros(flat_param.sizes(), options), 0};
}

void AdamW::step(State& state, at::Tensor& flat_param, const at::Tensor& flat_grad, const StepHyper& hyper) {
  at::NoGradGuard no_grad;
  // fp32 parameters and state in CPU memory: the fused one-pass kernel (optim/cpu_adamw.hpp), the same update
  // in one read and write of p, g, m, v instead of the ~9 passes of the ATen ops below.
  if (flat_param.is_cpu() && flat_grad.is_cpu() && flat_param.scalar_type() == at::kFloat &&
      state.exp_avg.scalar_type() == at::kFloat && flat_param.is_contiguous() && flat_grad.is_contiguous()) {
    cpu_step(state, flat_param, flat_grad, hyper, nullptr);
    return;
  }
  // On CUDA, parameters, gradients and state of one dtype: ATen's fused kernel (optim/fused_adamw.hpp), one read and
  // write of p, g, m, v and no temporaries; a dry run for CUDA (meta tensors) takes this branch too.
  const auto dtype = flat_param.scalar_type();
  if (kernel_target(flat_param) == c10::DeviceType::CUDA && flat_grad.scalar_type() == dtype &&
      state.exp_avg.scalar_type() == dtype && state.exp_avg_sq.scalar_type() == dtype && flat_param.is_contiguous() &&
      flat_grad.is_contiguous()) {
    if (flat_param.is_meta()) {
      state.steps += 1;
      return;
    }
    optim::fused_adamw_step(state, flat_param, flat_grad, hyper);
    return;
  }
  state.steps += 1;
  const double t = static_cast<double>(state.steps);
  // Grads may arrive in a different dtype than the state (bf16-true keeps all three in bf16).
  const at::Tensor grad = flat_grad.scalar_type() == state.exp_avg.scalar_type()
                              ? flat_grad
                              : flat_grad.to(state.exp_avg.scalar_type());
  if (hyper.weight_decay != 0.0) flat_param.mul_(1.0 - hyper.lr * hyper.weight_decay);
  const double b1 = hyper.beta1, b2 = hyper.beta2;
  state.exp_avg.mul_(b1).add_(grad, 1.0 - b1);
  state.exp_avg_sq.mul_(b2).addcmul_(grad, grad, 1.0 - b2);
  const double bias_correction1 = 1.0 - std::pow(b1, t);
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(b2, t));
  const double step_size = hyper.lr / bias_correction1;
  at::Tensor denom = (state.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps);
  if (state.exp_avg.scalar_type() == flat_param.scalar_type()) {
    flat_param.addcdiv_(state.exp_avg, denom, -step_size);
  } else {
    flat_param.add_((state.exp_avg / denom).mul_(-step_size).to(flat_param.scalar_type()));
  }
}

void optim::fused_adamw_step(AdamW::State& state, at::Tensor& flat_param, const at::Tensor& flat_grad,
                             const StepHyper& hyper) {
  at::NoGradGuard no_grad;
  state.steps += 1;
  // The kernel reads the step count from a float tensor on the parameters' device (torch keeps it as state).
  const at::Tensor step = at::full({}, static_cast<double>(state.steps), flat_param.options().dtype(at::kFloat));
  at::_fused_adamw_({flat_param}, {flat_grad}, {state.exp_avg}, {state.exp_avg_sq}, {}, {step}, hyper.lr, hyper.beta1,
                    hyper.beta2, hyper.weight_decay, AdamW::eps, /*amsgrad=*/false, /*maximize=*/false);
}

bool AdamW::cpu_step(State& state, at::Tensor& master, const at::Tensor& grad, const StepHyper& hyper,
                     at::Tensor* param_out) {
  state.steps += 1;
  if (master.is_meta()) return param_out != nullptr;  // a dry run: the fused loop allocates nothing, computes nothing
  optim::CpuAdamWHyper h;
  h.lr = hyper.lr;
  h.beta1 = hyper.beta1;
  h.beta2 = hyper.beta2;
  h.eps = eps;
  h.weight_decay = hyper.weight_decay;
  h.step = state.steps;
  optim::cpu_adamw_step(master, state.exp_avg, state.exp_avg_sq, grad, h, param_out);
  return param_out != nullptr;
}

std::int64_t AdamW::state_bytes(const State& state) {
  auto bytes = [](const at::Tensor& t) { return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0; };
  return bytes(state.exp_avg) + bytes(state.exp_avg_sq);
}

void Sgd::step(State&, at::Tensor& flat_param, const at::Tensor& flat_grad, const StepHyper& hyper) {
  at::NoGradGuard no_grad;
  if (hyper.weight_decay != 0.0) {
    flat_param.add_(flat_grad.to(flat_param.scalar_type()) + flat_param * hyper.weight_decay, -hyper.lr);
  } else {
    flat_param.add_(flat_grad.to(flat_param.scalar_type()), -hyper.lr);
  }
}

}  // namespace tessera
