#include "tessera/memory/counting_meta_allocator.hpp"

#include <c10/core/Allocator.h>

#include <atomic>
#include <mutex>

namespace tessera::memory {
namespace {

// The storage of a meta tensor has no data: the DataPtr's data is null and its context records the counted size,
// which the deleter gives back.
class CountingMetaAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const std::int64_t r = rounding_.load();
    const std::int64_t n = (static_cast<std::int64_t>(bytes) + r - 1) / r * r;
    const std::int64_t now = allocated_.fetch_add(n) + n;
    std::int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    return {nullptr, new Record{this, n}, &release, c10::Device(c10::DeviceType::Meta)};
  }
  void copy_data(void*, const void*, std::size_t) const override {}  // meta tensors hold no values

  void reset_peak() { peak_.store(allocated_.load()); }
  void set_rounding(std::int64_t bytes) { rounding_.store(bytes < 1 ? 1 : bytes); }
  AllocatorStats stats() const {
    const std::int64_t a = allocated_.load();
    return {a, peak_.load(), a};
  }

 private:
  struct Record {
    CountingMetaAllocator* owner;
    std::int64_t bytes;
  };
  static void release(void* ctx) {
    auto* r = static_cast<Record*>(ctx);
    r->owner->allocated_.fetch_sub(r->bytes);
    delete r;
  }

  std::atomic<std::int64_t> allocated_{0}, peak_{0}, rounding_{1};
};

CountingMetaAllocator* installed = nullptr;
std::once_flag install_once;

}  // namespace

void install_counting_meta_allocator() {
  std::call_once(install_once, [] {
    installed = new CountingMetaAllocator();  // leaked on purpose, as the CPU one
    c10::SetAllocator(c10::DeviceType::Meta, installed, /*priority=*/100);
  });
}

AllocatorStats meta_allocator_stats() {
  install_counting_meta_allocator();
  return installed->stats();
}

void reset_meta_peak() {
  install_counting_meta_allocator();
  installed->reset_peak();
}

void set_meta_rounding(std::int64_t bytes) {
  install_counting_meta_allocator();
  installed->set_rounding(bytes);
}

}  // namespace tessera::memory
