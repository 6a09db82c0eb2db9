#pragma once
// defines: OptimizerPolicy, StepHyper.
// The engine keeps parameters and gradients in flat 1-D buffers (one per unit: embedding, each block,
// head), and asks the optimizer policy to
//   State init(const at::Tensor& flat_param, c10::ScalarType state_dtype)   allocate state for one buffer
//   void step(State&, at::Tensor& flat_param, const at::Tensor& flat_grad, const StepHyper&)
//   std::int64_t state_bytes(const State&)                                    bytes the state occupies
// and reads `default_weight_decay` when the run config leaves weight_decay unset.
#include <ATen/core/Tensor.h>

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/core/axis.hpp"

namespace tessera {

// One model tensor inside the flat buffer (or shard) an optimizer updates: elements [offset, offset+length)
// of the buffer belong to a tensor of tensor_numel elements. Policies whose state depends on the tensor
// (Adam8bit keeps fp32 state for tensors under 4096 elements) may take the segments in init:
//   State init(const at::Tensor& flat_param, c10::ScalarType state_dtype, std::span<const ParamSegment>)
// The engine passes them when the policy has that overload; padding is in no segment.
struct ParamSegment {
  std::int64_t offset = 0;
  std::int64_t length = 0;
  std::int64_t tensor_numel = 0;
};

// Hyper-parameters of one optimizer step.
struct StepHyper {
  double lr = 1e-3;
  double weight_decay = 0.0;
  double beta1 = 0.9;    // Adam-family moment decays (torch.optim's defaults); SGD ignores them
  double beta2 = 0.999;
};

template <class P>
concept OptimizerPolicy =
    PolicyOf<P, axis::optimizer> &&
    requires(typename P::State& state, const typename P::State& cstate, at::Tensor& param, const at::Tensor& grad,
             const StepHyper& hyper, c10::ScalarType dtype) {
      { P::name } -> std::convertible_to<std::string_view>;
      { P::default_weight_decay } -> std::convertible_to<double>;
      { P::init(grad, dtype) } -> std::same_as<typename P::State>;
      P::step(state, param, grad, hyper);
      { P::state_bytes(cstate) } -> std::convertible_to<std::int64_t>;
    };

// True when the policy has a fused step for fp32 CPU master parameters (OffloadOptimizer):
//   void cpu_step(State&, at::Tensor& master, const at::Tensor& grad, const StepHyper&, at::Tensor* param_out)
// which may also write the updated parameters, cast, into *param_out (the copy sent back to the device) and
// returns whether it did. Without it, the offloaded step calls step() on the CPU tensors.
template <class P>
concept CpuFusedOptimizer =
    OptimizerPolicy<P> && requires(typename P::State& state, at::Tensor& param, const at::Tensor& grad,
                                   const StepHyper& hyper, at::Tensor* out) {
      { P::cpu_step(state, param, grad, hyper, out) } -> std::same_as<bool>;
    };

// One tensor of an optimizer's state, for training-state checkpoints (engine/train_state.hpp). per_element: the
// tensor has one value per element of the buffer it updates (AdamW's moments), so a checkpoint can be resharded
// to another number of ranks; otherwise (Adam8bit's codes and block absmax) it is read back only by a run that
// cuts the buffers alike (the same shard group size).
struct StateTensor {
  std::string_view name;
  at::Tensor tensor;  // the state's own tensor: a checkpoint reads it, a resume copies into it
  bool per_element = true;
};

// True when the policy lists its state for checkpoints:
//   std::vector<StateTensor> state_tensors(State&)
// A State's `steps` member, when it has one, is saved with it. A policy without the function trains as before;
// only checkpoint_dir= and resume= refuse it.
template <class P>
concept CheckpointableOptimizer = OptimizerPolicy<P> && requires(typename P::State& state) {
  { P::state_tensors(state) } -> std::same_as<std::vector<StateTensor>>;
};

// True when the policy's init takes the buffer's segments (see ParamSegment).
template <class P>
concept SegmentAwareOptimizer =
    OptimizerPolicy<P> && requires(const at::Tensor& param, c10::ScalarType dtype, std::span<const ParamSegment> s) {
      { P::init(param, dtype, s) } -> std::same_as<typename P::State>;
    };

}  // namespace tessera
