#pragma once
// defines: ShardLayout and ParamStore, the parameters the engine owns.
// Each unit's parameters live in one flat 1-D buffer, so the optimizer updates a unit with a handful of
// vectorised ops and sharding moves a unit as one tensor. A unit of n elements is padded with zeros to
// N = ceil(n / G) * G elements for a shard group of G ranks; shard r is the slice [r*S, (r+1)*S), S = N / G.
// Without parameter sharding every rank stores the whole padded buffer (N elements); with it (FullShard,
// HybridShard) each rank stores only its shard (S elements), and full units exist only while gathered.
// Parameters in a full unit buffer follow the model's spec order: unit_views() cuts a buffer into them.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/param_spec.hpp"
#include "tessera/optim/concept.hpp"

namespace tessera::io {
class CheckpointDir;
}

namespace tessera {

struct ShardLayout {
  std::int64_t group_size = 1;  // G: ranks a unit is cut across (1 = no sharding)
  std::int64_t group_rank = 0;  // r: this rank's shard
  bool store_shards = false;    // keep only shard r of each unit (parameter sharding)
};

class ParamStore {
 public:
  // pin_memory: a CPU store in page-locked memory, for asynchronous copies to a GPU (OffloadParams).
  // num_units: at least this many units, empty ones included (adapters: the embedding and head have none).
  ParamStore(std::vector<ParamSpec> specs, c10::ScalarType dtype, c10::Device device, ShardLayout layout = {},
             bool pin_memory = false, std::size_t num_units = 0);

  // Hugging Face initialisation (normal(0, std) for matrices, ones for norms), drawn in spec order
  // from one CPU generator seeded with `seed`: every rank and every world size gets the same weights.
  void initialize(double std, std::uint64_t seed);
  // Copies every spec'd tensor (this rank's part of it) from a checkpoint, converting its dtype; refuses
  // what check_loadable() refuses, and tensors holding NaN or Inf (FormatError naming the tensor).
  void load(const io::CheckpointDir& dir);
  // Reads only the checkpoint's header: FormatError for a missing, misshapen or unknown tensor, or one whose
  // dtype is not a floating type (F32, BF16, F16, F64). Cheap: callers check before allocating a store.
  static void check_loadable(std::span<const ParamSpec> specs, const io::CheckpointDir& dir);
  // Writes DIR/model.safetensors (or shards) with Hugging Face names in the store's dtype, from one full
  // buffer per unit (at least unit_numel(u) elements each; full_units() when the store holds them).
  void save(const std::filesystem::path& dir, std::span<const at::Tensor> full_units) const;

  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ShardLayout& layout() const { return layout_; }
  std::size_t num_units() const { return flats_.size(); }
  c10::ScalarType dtype() const { return dtype_; }
  c10::Device device() const { return device_; }

  std::int64_t unit_numel(std::size_t unit) const { return unit_numel_[unit]; }   // n: the unit's parameters
  std::int64_t padded_numel(std::size_t unit) const { return padded_numel_[unit]; }  // N = G * S
  std::int64_t shard_numel(std::size_t unit) const { return padded_numel_[unit] / layout_.group_size; }  // S

  // What this rank stores of the unit: the padded full buffer (N,) or its shard (S,).
  at::Tensor& flat_param(std::size_t unit) { return flats_[unit]; }
  const at::Tensor& flat_param(std::size_t unit) const { return flats_[unit]; }
  // This rank's shard of the unit, (S,): a view of the full buffer, or the stored shard itself.
  at::Tensor shard(std::size_t unit) const;
  // Where shard(unit) starts in the unit's full buffer: r * S.
  std::int64_t shard_offset(std::size_t unit) const { return layout_.group_rank * shard_numel(unit); }
  // The stored full buffers; tessera::Error when the store holds shards.
  std::span<const at::Tensor> full_units() const;

  // The unit's parameters as views (spec shapes) into `full`, a buffer of at least unit_numel(unit) elements.
  std::vector<at::Tensor> unit_views(std::size_t unit, const at::Tensor& full) const;
  // The tensors inside shard(unit): one segment per spec overlapping it, offsets relative to the shard.
  std::vector<ParamSegment> shard_segments(std::size_t unit) const;
  // Indices into specs() of the unit's parameters, in order.
  const std::vector<std::size_t>& unit_specs(std::size_t unit) const { return unit_specs_[unit]; }

  std::int64_t param_bytes() const;  // bytes this rank stores (shards when sharded, padding included)
  std::int64_t numel() const;        // parameters of the model (no padding)

 private:
  template <class Fill>
  void fill_units(Fill&& fill);  // fill(spec index, full-shape fp32/any tensor view of the unit buffer)

  std::vector<ParamSpec> specs_;
  c10::ScalarType dtype_;
  c10::Device device_;
  ShardLayout layout_;
  std::vector<at::Tensor> flats_;
  std::vector<std::int64_t> unit_numel_, padded_numel_;
  std::vector<std::int64_t> offsets_;  // per spec, element offset inside its unit's flat buffer
  std::vector<std::vector<std::size_t>> unit_specs_;
};

}  // namespace tessera
