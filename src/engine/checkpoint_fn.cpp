#include "tessera/engine/checkpoint_fn.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

namespace tessera {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // Arguments: x, the block's parameters, and the block function (as an address: AutogradContext only
  // stores IValues). One gradient is returned per argument, undefined for the address.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList params, std::int64_t fn_address) {
    ctx->saved_data["fn"] = fn_address;
    std::vector<at::Tensor> to_save{x};
    to_save.insert(to_save.end(), params.begin(), params.end());
    ctx->save_for_backward(to_save);
    at::NoGradGuard no_graph;
    return (*reinterpret_cast<const BlockFn*>(fn_address))(x, params);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto* fn = reinterpret_cast<const BlockFn*>(ctx->saved_data["fn"].toInt());
    variable_list saved = ctx->get_saved_variables();
    const bool x_needs_grad = saved[0].requires_grad();
    at::Tensor x = saved[0].detach().requires_grad_(x_needs_grad);
    std::vector<at::Tensor> params(saved.begin() + 1, saved.end());

    at::Tensor out;
    {
      at::AutoGradMode graph(true);
      out = (*fn)(x, params);
    }
    variable_list inputs;
    if (x_needs_grad) inputs.push_back(x);
    for (const auto& p : params)
      if (p.requires_grad()) inputs.push_back(p);
    variable_list grads = torch::autograd::grad({out}, inputs, {grad_outputs[0]}, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    variable_list result;
    std::size_t next = 0;
    result.push_back(x_needs_grad ? grads[next++] : at::Tensor());
    for (const auto& p : params) result.push_back(p.requires_grad() ? grads[next++] : at::Tensor());
    result.emplace_back();  // fn_address
    return result;
  }
};

}  // namespace

at::Tensor checkpointed_call(const BlockFn& fn, const at::Tensor& x, at::TensorList params) {
  return CheckpointFunction::apply(x, params, reinterpret_cast<std::int64_t>(&fn));
}

}  // namespace tessera
