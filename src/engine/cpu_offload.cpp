// implements: CpuOffload (engine/cpu_offload.hpp).
#include "tessera/engine/cpu_offload.hpp"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "tessera/core/error.hpp"
#include "tessera/engine/runtime.hpp"
#include "tessera/report/timeline.hpp"

namespace tessera {
namespace {

at::TensorOptions host(c10::ScalarType dtype, c10::Device device) {
  return at::TensorOptions().dtype(dtype).device(host_of(device)).pinned_memory(device.is_cuda());
}

std::int64_t bytes_of(const at::Tensor& t) { return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0; }

std::int64_t sum_bytes(const std::vector<at::Tensor>& ts) {
  std::int64_t n = 0;
  for (const auto& t : ts)
    if (t.defined()) n += static_cast<std::int64_t>(t.nbytes());
  return n;
}

}  // namespace

CpuOffload::CpuOffload(const std::vector<at::Tensor>& slices, bool slices_are_master, c10::ScalarType grad_dtype,
                       c10::Device device)
    : device_(device), owns_masters_(!slices_are_master) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& s : slices) {
    if (slices_are_master) {
      if (s.device() != host_of(device) || s.scalar_type() != at::kFloat)
        throw Error("CpuOffload: parameter offload needs fp32 CPU shards, got " + std::string(c10::toString(s.scalar_type())) +
                    " on " + s.device().str());
      masters_.push_back(s);
      staging_.emplace_back();
    } else {
      masters_.push_back(at::empty(s.sizes(), host(at::kFloat, device)).copy_(s));
      // The fused CPU step writes the device dtype here in the same pass; a same-dtype CPU slice needs none.
      staging_.push_back((device.is_cpu() || device.is_meta()) && s.scalar_type() == at::kFloat ? at::Tensor()
                                                                          : at::empty(s.sizes(), host(s.scalar_type(), device)));
    }
    grads_.push_back(at::empty(s.sizes(), host(grad_dtype, device)));
  }
  arrived_.assign(slices.size(), false);
}

void CpuOffload::grad_ready(std::size_t unit, const at::Tensor& device_grad) {
  const timeline::Scope timed(timeline::Kind::d2h, static_cast<std::int64_t>(unit), bytes_of(grads_[unit]));
  grads_[unit].copy_(device_grad, /*non_blocking=*/true);
  arrived_[unit] = true;
}

void CpuOffload::accumulate(std::size_t unit, const at::Tensor& device_grad, bool first) {
  at::Tensor& host = grads_[unit];
  const timeline::Scope timed(timeline::Kind::d2h, static_cast<std::int64_t>(unit), bytes_of(host));
  if (first)
    host.copy_(device_grad, /*non_blocking=*/true);
  else
    host.add_(device_grad.to(host.device()));  // no copy when it is already there (the CPU, a dry run's meta)
}

void CpuOffload::sync() const {
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
}

void CpuOffload::wait_grads() {
  for (std::size_t u = 0; u < arrived_.size(); ++u)
    if (!arrived_[u]) throw Error("CpuOffload: unit " + std::to_string(u) + "'s gradient was never copied to the CPU");
  sync();
  arrived_.assign(arrived_.size(), false);
}

void CpuOffload::push(std::size_t unit, at::Tensor& device_slice, bool staging_filled) {
  if (!owns_masters_) return;
  const timeline::Scope timed(timeline::Kind::h2d, static_cast<std::int64_t>(unit), bytes_of(device_slice));
  if (!staging_[unit].defined()) {
    device_slice.copy_(masters_[unit]);
    return;
  }
  if (!staging_filled) staging_[unit].copy_(masters_[unit]);
  device_slice.copy_(staging_[unit], /*non_blocking=*/true);
}

void CpuOffload::finish_push() { sync(); }

std::int64_t CpuOffload::master_bytes() const { return owns_masters_ ? sum_bytes(masters_) + sum_bytes(staging_) : 0; }
std::int64_t CpuOffload::grad_bytes() const { return sum_bytes(grads_); }

}  // namespace tessera
