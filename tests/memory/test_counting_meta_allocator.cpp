// tests for memory/counting_meta_allocator.hpp: meta tensors counted as a real device would hold them.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include "tessera/memory/allocator_stats.hpp"
#include "tessera/memory/counting_meta_allocator.hpp"

using namespace tessera;

TEST_CASE("meta tensors are counted while they live, and their peak kept", "[memory]") {
  memory::install_counting_meta_allocator();
  const c10::Device meta(c10::DeviceType::Meta);
  const std::int64_t base = memory::allocator_stats(meta).allocated;
  memory::reset_peak(meta);
  {
    const at::Tensor a = at::empty({1000}, at::TensorOptions().device(meta).dtype(at::kFloat));
    const at::Tensor b = at::empty({10, 10}, at::TensorOptions().device(meta).dtype(at::kBFloat16));
    CHECK(memory::allocator_stats(meta).allocated - base == 4000 + 200);
    const at::Tensor view = a.narrow(0, 0, 10);  // a view allocates nothing
    CHECK(memory::allocator_stats(meta).allocated - base == 4200);
  }
  CHECK(memory::allocator_stats(meta).allocated == base);
  CHECK(memory::allocator_stats(meta).peak - base == 4200);
  // The CUDA caching allocator's 512-byte blocks.
  memory::set_meta_rounding(512);
  {
    const at::Tensor c = at::empty({3}, at::TensorOptions().device(meta).dtype(at::kFloat));
    CHECK(memory::allocator_stats(meta).allocated - base == 512);
  }
  memory::set_meta_rounding(1);
  CHECK(memory::allocator_stats(meta).allocated == base);
}
