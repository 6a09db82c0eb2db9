// tests for memory/counting_meta_allocator.hpp: meta tensors counted as a real device would hold them.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include "tessera/core/error.hpp"
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

namespace {

// The bytes and storages of the holders made by `made_by` (any size, when `storage_bytes` is 0).
std::pair<std::int64_t, std::int64_t> held(const memory::PeakHolders& h, const std::string& made_by,
                                           std::int64_t storage_bytes = 0) {
  std::pair<std::int64_t, std::int64_t> out{0, 0};
  for (const memory::PeakHolder& x : h.holders)
    if (x.made_by == made_by && (storage_bytes == 0 || x.storage_bytes == storage_bytes)) {
      if (x.storage_bytes > 0) CHECK(x.bytes == x.storage_bytes * x.tensors);  // "(before)": of any size
      out.first += x.bytes;
      out.second += x.tensors;
    }
  return out;
}

}  // namespace

TEST_CASE("with tagging, the peak's bytes are told by the operator and autograd node that allocated them",
          "[memory]") {
  memory::install_counting_meta_allocator();
  const c10::Device meta(c10::DeviceType::Meta);
  const auto f32 = at::TensorOptions().device(meta).dtype(at::kFloat);
  const at::Tensor before = at::empty({250}, f32);  // live when tagging starts: "(before)"
  memory::PeakHolders h;
  {
    memory::MetaPeakTagging tagging;
    CHECK_THROWS_AS(memory::MetaPeakTagging(), Error);  // one at a time
    memory::reset_peak(meta);
    const at::Tensor x = at::empty({64, 32}, f32).requires_grad_();
    const at::Tensor w = at::empty({32, 16}, f32).requires_grad_();
    {
      const at::Tensor y = at::mm(x, w);  // (64, 16): 4096 bytes, kept until the backward below
      at::Tensor loss = y.sum();
      loss.backward();  // MmBackward0's two products: x's (64, 32) and w's (32, 16) gradients
    }
    const at::Tensor big = at::empty({100000}, f32);  // the peak is here: 400,000 bytes on top
    h = tagging.at_peak();
  }
  REQUIRE(!h.holders.empty());
  // big, the largest holder; x and w, one storage of each size.
  CHECK(h.holders.front().made_by == "aten::empty");
  CHECK(h.holders.front().storage_bytes == 400000);
  CHECK(h.holders.front().tensors == 1);
  CHECK(held(h, "aten::empty") == std::pair<std::int64_t, std::int64_t>{64 * 32 * 4 + 32 * 16 * 4 + 400000, 3});
  CHECK(held(h, "aten::empty", 64 * 32 * 4).second == 1);
  CHECK(h.reached_in == "aten::empty");
  CHECK(held(h, "(before)").first >= 1000);
  // The gradients, made in backward, are still live at the peak (x.grad and w.grad): by their node.
  CHECK(held(h, "aten::mm in MmBackward0") == std::pair<std::int64_t, std::int64_t>{64 * 32 * 4 + 32 * 16 * 4, 2});
  // Nothing else the forward made is live at the peak: y and the sum are gone.
  CHECK(held(h, "aten::mm").first == 0);
  // A second tagging starts from what is live then, and tags nothing it did not see.
  memory::MetaPeakTagging again;
  memory::reset_peak(meta);
  const memory::PeakHolders fresh = again.at_peak();
  REQUIRE(fresh.holders.size() == 1);
  CHECK(fresh.holders.front().made_by == "(before)");
  CHECK(fresh.reached_in.empty());
}
