// implements: the peak table and MFU (report/mfu.hpp).
#include "tessera/report/mfu.hpp"

#ifdef TESSERA_WITH_CUDA
#include <ATen/Context.h>
#include <cuda_runtime_api.h>
#endif

namespace tessera {

std::optional<double> peak_flops(std::string_view name, c10::ScalarType dtype) {
  const bool tensor = dtype == c10::ScalarType::BFloat16 || dtype == c10::ScalarType::Half;
  const auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
  const auto pick = [&](double reduced, double fp32) { return tensor ? reduced : fp32; };
  if (has("H100") || has("H200")) {
    if (has("NVL")) return pick(835.5e12, 60.0e12);
    if (has("PCIe")) return pick(756.5e12, 51.2e12);
    return pick(989.4e12, 66.9e12);
  }
  if (has("A100")) return pick(312.0e12, 19.5e12);
  return std::nullopt;
}

#ifdef TESSERA_WITH_CUDA
namespace {
// Whether CUDA runs fp32 matmuls in TF32: torch's older getter, or its per-backend one where the process set that
// API (then the older getter refuses to answer).
bool matmuls_in_tf32() {
  auto& context = at::globalContext();
  try {
    return context.allowTF32CuBLAS();
  } catch (const c10::Error&) {
    return context.float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL) == at::Float32Precision::TF32;
  }
}
}  // namespace
#endif

std::optional<double> device_peak_flops(c10::Device device, c10::ScalarType dtype) {
#ifdef TESSERA_WITH_CUDA
  if (device.is_cuda()) {
    cudaDeviceProp props{};
    const int index = device.has_index() ? device.index() : 0;
    if (cudaGetDeviceProperties(&props, index) != cudaSuccess) return std::nullopt;
    // fp32 matmuls in TF32 (tf32=on, or the process's setting): the TF32 tensor-core rate, half the bf16 one on
    // these GPUs (H100 SXM 494.7 TFLOP/s dense, A100 156).
    if (dtype == c10::ScalarType::Float && matmuls_in_tf32()) {
      const std::optional<double> bf16 = peak_flops(props.name, c10::ScalarType::BFloat16);
      return bf16 ? std::optional<double>(*bf16 / 2) : std::nullopt;
    }
    return peak_flops(props.name, dtype);
  }
#else
  (void)device;
  (void)dtype;
#endif
  return std::nullopt;
}

double mfu(double flops_per_step, double step_s, std::int64_t devices, double peak) {
  if (step_s <= 0 || devices <= 0 || peak <= 0) return 0.0;
  return flops_per_step / step_s / static_cast<double>(devices) / peak;
}

}  // namespace tessera
