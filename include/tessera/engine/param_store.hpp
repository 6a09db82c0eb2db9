#pragma once
// defines: ParamStore, the parameters (and their gradients) the engine owns.
// Each unit's parameters live in one flat 1-D buffer, (sum of the unit's numels,), and every parameter is a
// leaf view into it, so the optimizer updates a unit with a handful of vectorised ops and sharding can
// move a unit as one tensor. Gradients follow the same layout: allocate_grads() creates one zeroed flat
// buffer per unit and installs views of it as each parameter's .grad, so autograd accumulates into the
// buffer in place; release_grads() frees them (PyTorch's zero_grad(set_to_none=True)).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/core/param_spec.hpp"

namespace tessera::io {
class CheckpointDir;
}

namespace tessera {

class ParamStore {
 public:
  ParamStore(std::vector<ParamSpec> specs, c10::ScalarType dtype, c10::Device device);

  // Hugging Face initialisation (normal(0, std) for matrices, ones for norms), drawn in spec order
  // from one CPU generator seeded with `seed`: every rank and every world size gets the same weights.
  void initialize(double std, std::uint64_t seed);
  // Copies every spec'd tensor from a checkpoint, converting its dtype; refuses missing, misshapen or
  // unknown tensors (FormatError naming the tensor).
  void load(const io::CheckpointDir& dir);
  // Writes DIR/model.safetensors (or shards) with Hugging Face names in the store's dtype.
  void save(const std::filesystem::path& dir) const;

  const std::vector<ParamSpec>& specs() const { return specs_; }
  std::size_t num_units() const { return flats_.size(); }
  c10::ScalarType dtype() const { return dtype_; }
  // The unit's parameters in spec order (leaf tensors that require grad).
  const std::vector<at::Tensor>& unit_params(std::size_t unit) const { return unit_params_[unit]; }
  at::Tensor& flat_param(std::size_t unit) { return flats_[unit]; }
  const at::Tensor& flat_param(std::size_t unit) const { return flats_[unit]; }
  // Undefined between release_grads() and allocate_grads().
  const at::Tensor& flat_grad(std::size_t unit) const { return flat_grads_[unit]; }
  // Parameter `index` (spec order) as a leaf tensor.
  const at::Tensor& param(std::size_t index) const { return params_[index]; }

  void allocate_grads();
  void release_grads();
  bool has_grads() const;

  std::int64_t param_bytes() const;  // sum of the flat parameter buffers
  std::int64_t grad_bytes() const;   // sum of the flat gradient buffers (0 when released)
  std::int64_t numel() const;

 private:
  std::vector<ParamSpec> specs_;
  c10::ScalarType dtype_;
  c10::Device device_;
  std::vector<at::Tensor> flats_;        // per unit, (n_unit,)
  std::vector<at::Tensor> flat_grads_;   // per unit, (n_unit,) or undefined
  std::vector<at::Tensor> params_;       // per spec, views into flats_
  std::vector<std::size_t> offsets_;     // per spec, element offset inside its unit's flat buffer
  std::vector<std::vector<at::Tensor>> unit_params_;
};

}  // namespace tessera
