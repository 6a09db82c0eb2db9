#include "tessera/memory/counting_cpu_allocator.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstddef>
#include <new>
#include <cstring>
#include <mutex>

namespace tessera::memory {
namespace {

// Counts the bytes it hands out. LibTorch's raw_allocate() (oneDNN's reduced-precision kernels use it) needs a
// DataPtr whose context is its data pointer, so the bookkeeping lives in a header in front of the data:
//   [ Header (inner DataPtr, bytes) | pad to kHeaderBytes | data (bytes) ]
// The base allocator aligns blocks to 64 bytes, and kHeaderBytes keeps the data on that alignment.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t bytes) override {
    if (const std::int64_t limit = limit_.load(); limit > 0) {
      const std::int64_t now = allocated_.load();
      TORCH_CHECK_WITH(OutOfMemoryError, now + static_cast<std::int64_t>(bytes) <= limit,
                       "CPU out of memory: an allocation of ", bytes, " bytes would bring this rank to ",
                       now + static_cast<std::int64_t>(bytes), " bytes, over max_memory's ", limit);
    }
    c10::DataPtr inner = base_->allocate(bytes + kHeaderBytes);
    auto* block = static_cast<std::byte*>(inner.get());
    new (block) Header{std::move(inner), static_cast<std::int64_t>(bytes), this};
    const std::int64_t now = allocated_.fetch_add(static_cast<std::int64_t>(bytes)) + static_cast<std::int64_t>(bytes);
    std::int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    void* data = block + kHeaderBytes;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  // raw_deallocate(p) frees what raw_allocate() gave: the data pointer is the context, so release() serves both.
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void reset_peak() { peak_.store(allocated_.load()); }
  void set_limit(std::int64_t bytes) { limit_.store(bytes); }

  AllocatorStats stats() const {
    const std::int64_t allocated = allocated_.load();
    return {allocated, peak_.load(), allocated};
  }

 private:
  struct Header {
    c10::DataPtr inner;  // the whole block; frees it through the base allocator when destroyed
    std::int64_t bytes;  // what the caller asked for
    const CountingCpuAllocator* owner;
  };
  static constexpr std::size_t kHeaderBytes = 64;
  static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit in front of 64-byte-aligned data");

  static void release(void* data) {
    auto* header = reinterpret_cast<Header*>(static_cast<std::byte*>(data) - kHeaderBytes);
    header->owner->allocated_.fetch_sub(header->bytes);
    c10::DataPtr block = std::move(header->inner);
    header->~Header();
  }  // `block` frees the memory here

  c10::Allocator* base_;
  mutable std::atomic<std::int64_t> allocated_{0};
  mutable std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> limit_{0};
};

CountingCpuAllocator* installed = nullptr;
std::once_flag install_once;

}  // namespace

void install_counting_cpu_allocator() {
  std::call_once(install_once, [] {
    // Leaked on purpose: tensors freed during static destruction still call back into it.
    installed = new CountingCpuAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(installed, /*priority=*/100);
  });
}

AllocatorStats cpu_allocator_stats() {
  install_counting_cpu_allocator();
  return installed->stats();
}

void set_cpu_limit(std::int64_t bytes) {
  install_counting_cpu_allocator();
  installed->set_limit(bytes);
}

void reset_cpu_peak() {
  install_counting_cpu_allocator();
  installed->reset_peak();
}

}  // namespace tessera::memory
