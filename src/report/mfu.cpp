// implements: the peak table and MFU (report/mfu.hpp).
#include "tessera/report/mfu.hpp"

#ifdef TESSERA_WITH_CUDA
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

std::optional<double> device_peak_flops(c10::Device device, c10::ScalarType dtype) {
#ifdef TESSERA_WITH_CUDA
  if (device.is_cuda()) {
    cudaDeviceProp props{};
    const int index = device.has_index() ? device.index() : 0;
    if (cudaGetDeviceProperties(&props, index) == cudaSuccess) return peak_flops(props.name, dtype);
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
