#pragma once
// defines: PrecisionPolicy, what the engine asks a precision policy.
//   param_dtype        dtype the engine stores (master) parameters in
//   compute_dtype      dtype parameters are cast to for forward/backward
//   optim_state_dtype  dtype of the optimizer's state tensors
// Gradients always have param_dtype: autograd accumulates them on the stored parameters.
//   loss_scaling       true: dynamic loss scaling guards small gradients (fp16)
#include <c10/core/ScalarType.h>

#include <concepts>
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

template <class P>
concept PrecisionPolicy = PolicyOf<P, axis::precision> && requires {
  { P::name } -> std::convertible_to<std::string_view>;
  { P::param_dtype } -> std::convertible_to<c10::ScalarType>;
  { P::compute_dtype } -> std::convertible_to<c10::ScalarType>;
  { P::optim_state_dtype } -> std::convertible_to<c10::ScalarType>;
  { P::loss_scaling } -> std::convertible_to<bool>;
};

}  // namespace tessera
