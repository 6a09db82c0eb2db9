// implements: FrozenBase (engine/frozen_base.hpp).
#include "tessera/engine/frozen_base.hpp"

#include <ATen/ATen.h>

#include "tessera/core/error.hpp"

namespace tessera {

FrozenBase::FrozenBase(const ParamStore& store, const std::vector<bool>& quantize, bool double_quant,
                       c10::ScalarType dtype, c10::Device device)
    : specs_(store.specs()) {
  at::NoGradGuard no_grad;
  if (quantize.size() != specs_.size())
    throw Error("FrozenBase: " + std::to_string(quantize.size()) + " quantize flags for " +
                std::to_string(specs_.size()) + " parameters");
  const std::span<const at::Tensor> full = store.full_units();
  dense_.resize(specs_.size());
  nf4_.resize(specs_.size());
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    unit_specs_.push_back(store.unit_specs(u));
    bool any_quantized = false;
    for (std::size_t i : store.unit_specs(u)) any_quantized = any_quantized || quantize[i];
    // Dense units are kept whole (one buffer, shared with the store when it already matches).
    const at::Tensor& src = full[u];
    at::Tensor flat;
    if (!any_quantized) {
      flat = src.device() == device && src.scalar_type() == dtype ? src : src.to(device, dtype);
    } else {
      std::int64_t dense_numel = 0;
      for (std::size_t i : store.unit_specs(u))
        if (!quantize[i]) dense_numel += specs_[i].numel();
      flat = at::empty({dense_numel}, at::TensorOptions().dtype(dtype).device(device));
    }
    const std::vector<at::Tensor> views = store.unit_views(u, src);
    const std::vector<at::Tensor> kept = any_quantized ? std::vector<at::Tensor>() : store.unit_views(u, flat);
    std::vector<at::Tensor> unit;
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < views.size(); ++k) {
      const std::size_t i = store.unit_specs(u)[k];
      if (quantize[i]) {
        nf4_[i] = quant::nf4_quantize(views[k].to(device), double_quant);
        unit.emplace_back();
      } else if (!any_quantized) {
        dense_[i] = kept[k];
        unit.push_back(dense_[i]);
      } else {
        dense_[i] = flat.narrow(0, offset, specs_[i].numel()).view(specs_[i].shape);
        dense_[i].copy_(views[k]);
        offset += specs_[i].numel();
        unit.push_back(dense_[i]);
      }
    }
    flats_.push_back(flat);
    units_.push_back(std::move(unit));
  }
}

at::Tensor FrozenBase::linear(std::size_t spec, const at::Tensor& x, const ops::Gemm& gemm) const {
  if (nf4_[spec]) return quant::nf4_linear(x, *nf4_[spec], gemm);
  return gemm.linear(x, dense_[spec]);
}

at::Tensor FrozenBase::weight(std::size_t spec, c10::ScalarType dtype) const {
  if (nf4_[spec]) return quant::nf4_dequantize(*nf4_[spec], dtype);
  return dense_[spec].to(dtype);
}

std::int64_t FrozenBase::bytes() const {
  std::int64_t n = 0;
  for (const auto& f : flats_) n += static_cast<std::int64_t>(f.nbytes());
  for (const auto& q : nf4_)
    if (q) n += q->bytes();
  return n;
}

}  // namespace tessera
