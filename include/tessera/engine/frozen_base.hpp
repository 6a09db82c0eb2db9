#pragma once
// defines: FrozenBase, the base model under Lora/QLora: every parameter in the compute dtype on the device,
// never trained (no gradients, no optimizer state). Under QLora the linear weights (ParamSpec::linear: the
// attention and MLP projections) are kept as NF4 instead (quant/nf4.hpp) and dequantized on the fly by
// linear(); embeddings, norms, biases and the LM head stay dense, as bitsandbytes leaves them.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/engine/param_store.hpp"
#include "tessera/ops/gemm.hpp"
#include "tessera/quant/nf4.hpp"

namespace tessera {

class FrozenBase {
 public:
  // store: the base parameters, full units (any dtype and device). Dense parameters become views of a copy
  // in `dtype` on `device` (the store itself when it already is that); parameters with quantize[i] become NF4
  // on `device`, quantized from the store's values.
  FrozenBase(const ParamStore& store, const std::vector<bool>& quantize, bool double_quant, c10::ScalarType dtype,
             c10::Device device);

  const std::vector<ParamSpec>& specs() const { return specs_; }
  // Unit u's parameters in spec order; a quantized one is an undefined tensor (use linear()).
  const std::vector<at::Tensor>& unit(std::size_t u) const { return units_[u]; }
  // Index into specs() of unit u's k-th parameter.
  std::size_t spec_of(std::size_t u, std::size_t k) const { return unit_specs_[u][k]; }
  bool quantized(std::size_t spec) const { return nf4_[spec].has_value(); }
  // x @ W^T for parameter `spec` (an (out, in) matrix) through gemm, dequantizing it on the fly when it is NF4.
  at::Tensor linear(std::size_t spec, const at::Tensor& x, const ops::Gemm& gemm) const;
  // Parameter `spec` as a dense tensor in `dtype` (dequantized when NF4): for merging and export.
  at::Tensor weight(std::size_t spec, c10::ScalarType dtype) const;
  std::int64_t bytes() const;  // dense buffers + NF4 codes and scales

 private:
  std::vector<ParamSpec> specs_;
  std::vector<std::vector<std::size_t>> unit_specs_;
  std::vector<at::Tensor> flats_;                     // dense storage per unit
  std::vector<std::vector<at::Tensor>> units_;        // views into flats_
  std::vector<at::Tensor> dense_;                     // per spec (undefined when quantized)
  std::vector<std::optional<quant::Nf4Tensor>> nf4_;  // per spec
};

}  // namespace tessera
