#include "tessera/memory/counting_cpu_allocator.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "tessera/core/compat.hpp"

namespace tessera::memory {
namespace {

class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t bytes) TESSERA_ALLOCATE_CONST override {
    c10::DataPtr inner = base_->allocate(bytes);
    void* data = inner.get();
    auto* ctx = new Context{std::move(inner), static_cast<std::int64_t>(bytes), this};
    const std::int64_t now = allocated_.fetch_add(ctx->bytes) + ctx->bytes;
    std::int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    return {data, ctx, &release, c10::Device(c10::DeviceType::CPU)};
  }

  // Pure virtual from LibTorch 2.3 on; a plain member before.
  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }

  void reset_peak() { peak_.store(allocated_.load()); }

  AllocatorStats stats() const {
    const std::int64_t allocated = allocated_.load();
    return {allocated, peak_.load(), allocated};
  }

 private:
  struct Context {
    c10::DataPtr inner;  // frees through the base allocator when destroyed
    std::int64_t bytes;
    const CountingCpuAllocator* owner;
  };
  static void release(void* raw) {
    auto* ctx = static_cast<Context*>(raw);
    ctx->owner->allocated_.fetch_sub(ctx->bytes);
    delete ctx;
  }

  c10::Allocator* base_;
  mutable std::atomic<std::int64_t> allocated_{0};
  mutable std::atomic<std::int64_t> peak_{0};
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

void reset_cpu_peak() {
  install_counting_cpu_allocator();
  installed->reset_peak();
}

}  // namespace tessera::memory
