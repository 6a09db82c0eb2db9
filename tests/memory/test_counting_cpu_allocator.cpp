// The counting CPU allocator sees every LibTorch CPU allocation, byte for byte.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <vector>

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

TEST_CASE("under offload a snapshot line splits each figure as the seeds' Optim GPU / Optim CPU", "[memory]") {
  OwnedBytes owned{1 << 30, 0, 0};
  owned.optim_cpu = 2LL << 30;
  const auto gpu = make_snapshot(1, 0, Phase::after_optimizer_step, 0, owned, AllocatorStats{2LL << 30, 3LL << 30, 3LL << 30});
  CHECK(format_snapshot(gpu) ==
        "[after_opt] Params 1.00 GiB | Grads 0.00 GiB | Optim GPU 0.00 GiB | Optim CPU 2.00 GiB | Acts 1.00 GiB | "
        "Allocated 2.00 GiB (peak 3.00) | Reserved 3.00 GiB");
  // Computing on the CPU itself: the host figure is inside `allocated`, and the device is no GPU.
  const auto cpu = make_snapshot(1, 0, Phase::after_optimizer_step, 0, owned,
                                 AllocatorStats{4LL << 30, 4LL << 30, 4LL << 30}, true);
  CHECK(cpu.acts == 1LL << 30);
  CHECK(format_snapshot(cpu).find("| Optim device 0.00 GiB | Optim CPU 2.00 GiB |") != std::string::npos);
  CHECK(from_record(to_record(cpu)).host_is_device);
  CHECK_FALSE(from_record(to_record(gpu)).host_is_device);
}

TEST_CASE("several ranks' snapshots print one line of each figure's highest rank", "[memory]") {
  const auto r0 = make_snapshot(1, 0, Phase::after_backward, 0, OwnedBytes{1 << 30, 1 << 30, 0}, AllocatorStats{3LL << 30, 5LL << 30, 6LL << 30});
  const auto r1 = make_snapshot(1, 0, Phase::after_backward, 1, OwnedBytes{1 << 30, 1 << 30, 0}, AllocatorStats{4LL << 30, 4LL << 30, 4LL << 30});
  const std::vector<MemorySnapshot> ranks{r0, r1};
  CHECK(format_snapshot_max(ranks) ==
        "[after_bwd] Params 1.00 GiB (r0) | Grads 1.00 GiB (r0) | Optim 0.00 GiB (r0) | Acts 2.00 GiB (r1) | "
        "Allocated 4.00 GiB (r1) (peak 5.00, r0) | Reserved 6.00 GiB (r0) | max over 2 ranks");
}
