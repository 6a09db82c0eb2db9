// The counting CPU allocator sees every LibTorch CPU allocation, byte for byte.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "tessera/memory/counting_cpu_allocator.hpp"
#include "tessera/memory/snapshot.hpp"

using namespace tessera::memory;

TEST_CASE("the counting allocator counts live bytes and the peak", "[memory]") {
  install_counting_cpu_allocator();
  const auto base = cpu_allocator_stats();
  {
    at::Tensor a = at::empty({1000}, at::kFloat);     // 4000 bytes
    at::Tensor b = at::empty({250}, at::kDouble);     // 2000 bytes
    const auto during = cpu_allocator_stats();
    CHECK(during.allocated - base.allocated == 6000);
    CHECK(during.peak >= base.allocated + 6000);
    CHECK(during.reserved == during.allocated);
  }
  CHECK(cpu_allocator_stats().allocated == base.allocated);
  CHECK(cpu_allocator_stats().peak >= base.allocated + 6000);
}

TEST_CASE("snapshots compute acts as the seeds define it and print one line", "[memory]") {
  const auto s = make_snapshot(3, 0, Phase::after_backward, 0, OwnedBytes{1 << 30, 1 << 30, 0, 0},
                               AllocatorStats{3LL << 30, 4LL << 30, 5LL << 30});
  CHECK(s.acts == 1LL << 30);
  CHECK(format_snapshot(s) ==
        "[after_bwd] Params 1.00 GiB | Grads 1.00 GiB | Optim 0.00 GiB | Acts 1.00 GiB | Allocated 3.00 GiB (peak "
        "4.00) | Reserved 5.00 GiB");
  CHECK(phase_label(Phase::before_forward) == "before_fwd");
  CHECK(phase_label(Phase::after_optimizer_step) == "after_opt");
}
