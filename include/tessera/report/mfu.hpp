#pragma once
// defines: model FLOPs utilization, as llm.c and torchtitan print it:
//   counts_training_flops<M>   a family whose Config gives training_flops_per_token(seq_len) (Llama, OPT)
//   peak_flops                 the dense peak FLOP/s of a GPU the labs use, by its CUDA name and the compute dtype
//   device_peak_flops          peak_flops of the device a run computes on; nullopt on the CPU or an unknown GPU
//   mfu                        achieved FLOP/s per device over the peak
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <concepts>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

template <class M>
concept counts_training_flops = requires(const typename M::Config& c, std::int64_t seq_len) {
  { c.training_flops_per_token(seq_len) } -> std::convertible_to<double>;
};

// Dense (no sparsity) peak FLOP/s from the vendors' data sheets, bf16/fp16 tensor-core rate for a bf16 or fp16
// compute dtype, the fp32 (non-tensor-core: PyTorch leaves TF32 off for matmuls unless tf32=on) rate otherwise:
//   H100 SXM (and "H100 80GB HBM3")  989.4e12 / 66.9e12     H100 PCIe  756.5e12 / 51.2e12
//   H100 NVL                          835.5e12 / 60.0e12     H200       989.4e12 / 66.9e12 (H200 NVL: as H100 NVL)
//   A100 (SXM and PCIe)               312.0e12 / 19.5e12
// nullopt for any other name.
std::optional<double> peak_flops(std::string_view device_name, c10::ScalarType compute_dtype);

// The CUDA device's name through the CUDA runtime and peak_flops of it (for fp32 with TF32 matmuls, tf32=on: half
// the bf16 rate, the TF32 tensor-core rate); nullopt for a CPU device, a build without CUDA, or a GPU the table
// lacks (give peak_tflops= then).
std::optional<double> device_peak_flops(c10::Device device, c10::ScalarType compute_dtype);

// flops_per_step / step_s / devices / peak: the fraction of the devices' peak the step achieved.
double mfu(double flops_per_step, double step_s, std::int64_t devices, double peak);

}  // namespace tessera
