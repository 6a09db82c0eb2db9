#pragma once
// defines: CpuOffload, the host side of OffloadOptimizer and OffloadParams. Per unit it holds
//   master   fp32 copy of what this rank updates (the unit, or its shard), in host memory (pinned when the
//            device is a GPU, so copies to and from it run asynchronously); under OffloadParams the store's
//            own CPU shard is the master and nothing is copied
//   grad     a host buffer that the unit's gradient is copied into as soon as backward has made it final, or
//            (streamed: ShardGradOp/FullShard, UnitEngine::stream_grads) that every micro-step's reduced gradient
//            is added into, so that the device keeps no gradient shard across micro-steps
//   staging  (OffloadOptimizer) the updated master in the device's dtype, copied back to the device
// The optimizer steps on master with grad on the CPU; push() returns the result to the device.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {

class CpuOffload {
 public:
  // slices[u]: what the optimizer updates for unit u. slices_are_master: they are CPU fp32 already
  // (OffloadParams); otherwise fp32 host copies are made. grad_dtype: the dtype of the device gradients.
  CpuOffload(const std::vector<at::Tensor>& slices, bool slices_are_master, c10::ScalarType grad_dtype,
             c10::Device device);

  // Starts copying the unit's final gradient to its host buffer (asynchronous from a GPU).
  void grad_ready(std::size_t unit, const at::Tensor& device_grad);
  // Streamed: one micro-step's reduced gradient of the unit into its host buffer, copied when `first` (asynchronous
  // from a GPU), else added (after a blocking copy to the host, which also waits for the earlier one); then
  // grad_final() says the buffer holds the step's sum.
  void accumulate(std::size_t unit, const at::Tensor& device_grad, bool first);
  void grad_final(std::size_t unit) { arrived_[unit] = true; }
  // Waits until every started gradient copy has landed; throws if a unit's gradient never arrived.
  void wait_grads();
  // The copy-back target for the optimizer's fused output, or nullptr (no copy-back needed).
  at::Tensor* staging(std::size_t unit) { return staging_[unit].defined() ? &staging_[unit] : nullptr; }
  // Sends the updated parameters to the device slice (from staging when the optimizer filled it).
  void push(std::size_t unit, at::Tensor& device_slice, bool staging_filled);
  // Waits for the copies push() started (before the device reads the parameters).
  void finish_push();

  at::Tensor& master(std::size_t unit) { return masters_[unit]; }
  at::Tensor& grad(std::size_t unit) { return grads_[unit]; }
  std::size_t num_units() const { return masters_.size(); }
  std::int64_t master_bytes() const;  // masters + staging; 0 under OffloadParams (the store counts those)
  std::int64_t grad_bytes() const;

 private:
  void sync() const;

  c10::Device device_;
  bool owns_masters_;
  std::vector<at::Tensor> masters_, grads_, staging_;
  std::vector<bool> arrived_;
};

}  // namespace tessera
