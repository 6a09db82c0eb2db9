#include "tessera/memory/allocator_stats.hpp"

#include "tessera/core/error.hpp"
#include "tessera/memory/counting_cpu_allocator.hpp"
#include "tessera/memory/counting_meta_allocator.hpp"

#ifdef TESSERA_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace tessera::memory {

bool cuda_stats_available() {
#ifdef TESSERA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void reset_peak(c10::Device device) {
  if (device.is_cpu()) return reset_cpu_peak();
  if (device.is_meta()) return reset_meta_peak();
#ifdef TESSERA_WITH_CUDA
  if (device.is_cuda()) return c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  throw Error("memory statistics for device " + device.str() + " are not available in this build");
}

AllocatorStats allocator_stats(c10::Device device) {
  if (device.is_cpu()) return cpu_allocator_stats();
  if (device.is_meta()) return meta_allocator_stats();
#ifdef TESSERA_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    constexpr std::size_t aggregate = 0;  // StatType::AGGREGATE in every LibTorch version
    return {stats.allocated_bytes[aggregate].current, stats.allocated_bytes[aggregate].peak,
            stats.reserved_bytes[aggregate].current};
  }
#endif
  throw Error("memory statistics for device " + device.str() +
              " are not available in this build; rebuild tessera against a LibTorch with that backend");
}

}  // namespace tessera::memory
