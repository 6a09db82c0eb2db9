// TracedCommunicator (dist/traced_communicator.hpp) over MPI at 1, 2 and 4 ranks: every collective still computes
// what the communicator under it does, and the sink hears each one once, with its kind, its bytes and an interval
// that ends after it began. Checks come after the collectives, so a failure on one rank leaves no rank waiting.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <vector>

#include "tessera/dist/traced_communicator.hpp"
#include "tessera/dist/world.hpp"

using namespace tessera::dist;

namespace {

struct Heard {
  CollectiveKind kind;
  std::int64_t bytes;
  bool ordered;
};

}  // namespace

TEST_CASE("TracedCommunicator reports each collective once, with its bytes, and changes no result", "[dist]") {
  std::vector<Heard> heard;
  TracedCommunicator comm(AnyCommunicator::of(MpiCommunicator(World::instance().comm())),
                          [&](CollectiveKind kind, std::int64_t bytes, CollectiveClock::time_point begin,
                              CollectiveClock::time_point end) { heard.push_back({kind, bytes, begin <= end}); });
  const int n = comm.size(), r = comm.rank();
  const at::Tensor sum = at::full({6}, static_cast<double>(r + 1), at::kFloat);
  comm.all_reduce(sum, ReduceOp::sum);
  const at::Tensor shard = at::full({4}, static_cast<double>(r), at::kDouble);
  const at::Tensor gathered = at::empty({4 * n}, at::kDouble);
  TracedWork gather = comm.all_gather_async(shard, gathered);
  const bool heard_before_wait = heard.size() > 1;
  gather.wait();
  gather.wait();  // a second wait reports nothing more
  const at::Tensor full = at::ones({2 * n}, at::kFloat), part = at::empty({2}, at::kFloat);
  comm.reduce_scatter(full, part, ReduceOp::sum);
  const at::Tensor b = at::full({3}, static_cast<double>(r), at::kLong);
  comm.broadcast(b, 0);
  comm.barrier();

  CHECK(at::allclose(sum, at::full({6}, n * (n + 1) / 2.0, at::kFloat)));
  std::vector<at::Tensor> parts;
  for (int k = 0; k < n; ++k) parts.push_back(at::full({4}, static_cast<double>(k), at::kDouble));
  CHECK(at::equal(gathered, at::cat(parts)));
  CHECK(at::allclose(part, at::full({2}, static_cast<double>(n), at::kFloat)));
  CHECK(at::equal(b, at::zeros({3}, at::kLong)));
  CHECK_FALSE(heard_before_wait);
  REQUIRE(heard.size() == 5);
  CHECK(heard[0].kind == CollectiveKind::all_reduce);
  CHECK(heard[0].bytes == 6 * 4);
  CHECK(heard[1].kind == CollectiveKind::all_gather);
  CHECK(heard[1].bytes == 4 * n * 8);  // the assembled output
  CHECK(heard[2].kind == CollectiveKind::reduce_scatter);
  CHECK(heard[2].bytes == 2 * n * 4);  // the reduced input
  CHECK(heard[3].kind == CollectiveKind::broadcast);
  CHECK(heard[3].bytes == 3 * 8);
  CHECK(heard[4].kind == CollectiveKind::barrier);
  CHECK(heard[4].bytes == 0);
  for (const Heard& h : heard) CHECK(h.ordered);
}
