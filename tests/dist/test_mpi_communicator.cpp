// MpiCommunicator: every collective, blocking and async, for each dtype and op, at whatever size the job has
// (1, 2, 4 ranks). Rank r contributes (r+1) * [0, 1, ..., n-1]: small integers, exact in every dtype, so each
// rank computes the expected result itself (in float64, rounded once to the dtype, as documented for bf16/fp16).
// Checks come after the collectives, so a failure on one rank never leaves the others waiting.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/dist/world.hpp"

using tessera::dist::MpiCommunicator;
using tessera::dist::MpiWork;
using tessera::dist::ReduceOp;
using tessera::dist::World;

namespace {

const std::vector<c10::ScalarType> all_dtypes{at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kLong, at::kInt};

at::Tensor contribution(int rank, std::int64_t n, c10::ScalarType dtype) {
  return (at::arange(n, at::kDouble) * (rank + 1)).to(dtype);
}

// op over the contributions of ranks 0 .. world-1, in float64, rounded once to dtype.
at::Tensor expected_reduce(int world, std::int64_t n, c10::ScalarType dtype, ReduceOp op) {
  at::Tensor acc = contribution(0, n, at::kDouble);
  for (int r = 1; r < world; ++r)
    acc = op == ReduceOp::max ? at::maximum(acc, contribution(r, n, at::kDouble)) : acc + contribution(r, n, at::kDouble);
  if (op == ReduceOp::avg) acc = acc / world;
  return acc.to(dtype);
}

at::Tensor expected_gather(int world, std::int64_t n, c10::ScalarType dtype) {
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world; ++r) parts.push_back(contribution(r, n, dtype));
  return at::cat(parts);
}

bool integral(c10::ScalarType dtype) { return c10::isIntegralType(dtype, false); }

std::string label(c10::ScalarType dtype, ReduceOp op, bool async) {
  const char* name = op == ReduceOp::sum ? "sum" : op == ReduceOp::avg ? "avg" : "max";
  return std::string(c10::toString(dtype)) + " " + name + (async ? " async" : " blocking");
}

}  // namespace

TEST_CASE("MpiCommunicator: all_reduce sum/avg/max, every dtype, blocking and async", "[dist]") {
  MpiCommunicator comm(World::instance().comm());
  const std::int64_t n = 17;
  for (const auto dtype : all_dtypes)
    for (const auto op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (const bool async : {false, true}) {
        INFO(label(dtype, op, async));
        at::Tensor t = contribution(comm.rank(), n, dtype).view({1, n});
        if (op == ReduceOp::avg && integral(dtype)) {
          CHECK_THROWS_WITH(comm.all_reduce(t, op), Catch::Contains("would truncate"));
          continue;
        }
        if (async) {
          MpiWork work = comm.all_reduce_async(t, op);
          work.wait();
          CHECK(work.is_completed());
        } else {
          comm.all_reduce(t, op);
        }
        CHECK(at::equal(t.view(-1), expected_reduce(comm.size(), n, dtype, op)));
      }
}

TEST_CASE("MpiCommunicator: bf16 sums are taken in float32 and rounded once", "[dist]") {
  MpiCommunicator comm(World::instance().comm());
  // 256 + 1 + 1 + 1 is 259 -> 260 in bf16 (spacing 2); summing in bf16 would round each 256 + 1 back to 256.
  at::Tensor t = at::full({4}, comm.rank() == 0 ? 256.0 : 1.0, at::kBFloat16);
  comm.all_reduce(t, ReduceOp::sum);
  const at::Tensor want = at::full({4}, 256.0 + (comm.size() - 1), at::kFloat).to(at::kBFloat16);
  CHECK(at::equal(t, want));
}

TEST_CASE("MpiCommunicator: reduce_scatter, every dtype, blocking and async", "[dist]") {
  MpiCommunicator comm(World::instance().comm());
  const std::int64_t n = 6;
  for (const auto dtype : all_dtypes)
    for (const auto op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (const bool async : {false, true}) {
        if (op == ReduceOp::avg && integral(dtype)) continue;
        INFO(label(dtype, op, async));
        const at::Tensor input = contribution(comm.rank(), comm.size() * n, dtype);
        const at::Tensor output = at::zeros({n}, dtype);
        if (async)
          comm.reduce_scatter_async(input, output, op).wait();
        else
          comm.reduce_scatter(input, output, op);
        CHECK(at::equal(output, expected_reduce(comm.size(), comm.size() * n, dtype, op).narrow(0, comm.rank() * n, n)));
        CHECK(at::equal(input, contribution(comm.rank(), comm.size() * n, dtype)));  // input left as it was
      }
}

TEST_CASE("MpiCommunicator: all_gather, every dtype, blocking and async, separate and in place", "[dist]") {
  MpiCommunicator comm(World::instance().comm());
  const std::int64_t n = 5;
  for (const auto dtype : all_dtypes)
    for (const bool async : {false, true}) {
      INFO(label(dtype, ReduceOp::sum, async));
      const at::Tensor input = contribution(comm.rank(), n, dtype);
      const at::Tensor output = at::zeros({comm.size(), n}, dtype);
      // The sharded-parameter layout: this rank's shard is its own block of the full flat buffer.
      const at::Tensor flat = at::zeros({comm.size() * n}, dtype);
      const at::Tensor shard = flat.narrow(0, comm.rank() * n, n);
      shard.copy_(input);
      if (async) {
        MpiWork separate = comm.all_gather_async(input, output);
        MpiWork in_place = comm.all_gather_async(shard, flat);
        in_place.wait();
        separate.wait();
      } else {
        comm.all_gather(input, output);
        comm.all_gather(shard, flat);
      }
      CHECK(at::equal(output.view(-1), expected_gather(comm.size(), n, dtype)));
      CHECK(at::equal(flat, expected_gather(comm.size(), n, dtype)));
    }
}

TEST_CASE("MpiCommunicator: broadcast from the first and the last rank, every dtype, blocking and async", "[dist]") {
  MpiCommunicator comm(World::instance().comm());
  const std::int64_t n = 9;
  for (const auto dtype : all_dtypes)
    for (const int root : {0, comm.size() - 1})
      for (const bool async : {false, true}) {
        INFO(label(dtype, ReduceOp::sum, async) << " root " << root);
        const at::Tensor t = comm.rank() == root ? contribution(root, n, dtype) : at::zeros({n}, dtype);
        if (async) {
          MpiWork work = comm.broadcast_async(t, root);
          while (!work.is_completed()) {
          }
        } else {
          comm.broadcast(t, root);
        }
        CHECK(at::equal(t, contribution(root, n, dtype)));
      }
}

TEST_CASE("MpiCommunicator: coalesced all_reduce over mixed dtypes and shapes", "[dist]") {
  MpiCommunicator comm(World::instance().comm());
  const std::vector<std::vector<std::int64_t>> shapes{{3, 4}, {5}, {}, {2, 2}, {7}, {1, 0}};
  const std::vector<c10::ScalarType> dtypes{at::kFloat, at::kBFloat16, at::kFloat, at::kLong, at::kHalf, at::kFloat};
  for (const auto op : {ReduceOp::sum, ReduceOp::max})
    for (const bool async : {false, true}) {
      INFO(label(at::kFloat, op, async));
      std::vector<at::Tensor> tensors;
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const std::int64_t numel = c10::multiply_integers(shapes[i]);
        tensors.push_back(contribution(comm.rank(), numel, dtypes[i]).view(shapes[i]));
      }
      if (async)
        comm.all_reduce_async(tensors, op).wait();
      else
        comm.all_reduce(tensors, op);
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const at::Tensor want = expected_reduce(comm.size(), tensors[i].numel(), dtypes[i], op).view(shapes[i]);
        CHECK(at::equal(tensors[i], want));
      }
    }
}

TEST_CASE("MpiCommunicator: several async collectives in flight, waited out of order or dropped", "[dist]") {
  MpiCommunicator comm(World::instance().comm());
  const std::int64_t n = 11;
  const at::Tensor a = contribution(comm.rank(), n, at::kFloat);
  const at::Tensor b = contribution(comm.rank(), n, at::kBFloat16);
  const at::Tensor c = contribution(comm.rank(), n, at::kDouble);
  std::vector<MpiWork> works;
  works.push_back(comm.all_reduce_async(a, ReduceOp::sum));
  works.push_back(comm.all_reduce_async(b, ReduceOp::avg));
  { MpiWork dropped = comm.all_reduce_async(c, ReduceOp::max); }  // the destructor waits and writes back
  works[1].wait();
  works[0].wait();
  CHECK(at::equal(a, expected_reduce(comm.size(), n, at::kFloat, ReduceOp::sum)));
  CHECK(at::equal(b, expected_reduce(comm.size(), n, at::kBFloat16, ReduceOp::avg)));
  CHECK(at::equal(c, expected_reduce(comm.size(), n, at::kDouble, ReduceOp::max)));
}

TEST_CASE("MpiCommunicator: buffers beyond one MPI call's count are cut into chunks", "[dist]") {
  MpiCommunicator comm(World::instance().comm(), /*max_count_per_call=*/5);
  const std::int64_t n = 17;  // 4 calls: 5 + 5 + 5 + 2
  const at::Tensor t = contribution(comm.rank(), n, at::kBFloat16);
  comm.all_reduce(t, ReduceOp::sum);
  CHECK(at::equal(t, expected_reduce(comm.size(), n, at::kBFloat16, ReduceOp::sum)));
  const at::Tensor u = contribution(comm.rank(), n, at::kLong);
  comm.all_reduce_async(u, ReduceOp::max).wait();
  CHECK(at::equal(u, expected_reduce(comm.size(), n, at::kLong, ReduceOp::max)));
  const at::Tensor v = comm.rank() == 0 ? contribution(0, n, at::kFloat) : at::zeros({n});
  comm.broadcast_async(v, 0).wait();
  CHECK(at::equal(v, contribution(0, n, at::kFloat)));
  // reduce_scatter and all_gather cannot be cut: a per-rank block beyond the limit is refused.
  CHECK_THROWS_WITH(comm.reduce_scatter(at::zeros({comm.size() * 6}), at::zeros({6}), ReduceOp::sum),
                    Catch::Contains("6 elements per rank exceed the 5"));
  CHECK_THROWS_WITH(comm.all_gather(at::zeros({6}), at::zeros({comm.size() * 6})),
                    Catch::Contains("6 elements per rank exceed the 5"));
}

TEST_CASE("MpiCommunicator: bad arguments are refused with what was wrong", "[dist]") {
  MpiCommunicator comm(World::instance().comm());
  const int w = comm.size();
  CHECK_THROWS_WITH(MpiCommunicator(World::instance().comm(), 0), Catch::Contains("max_count_per_call=0"));
  CHECK_THROWS_WITH(comm.all_reduce(at::zeros({3, 4}).t(), ReduceOp::sum), Catch::Contains("not contiguous"));
  CHECK_THROWS_WITH(comm.all_reduce(at::zeros({3}, at::kBool), ReduceOp::max), Catch::Contains("dtype Bool"));
  CHECK_THROWS_WITH(comm.all_reduce(at::Tensor(), ReduceOp::sum), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(comm.reduce_scatter(at::zeros({w * 4 + 1}), at::zeros({4}), ReduceOp::sum),
                    Catch::Contains("input has " + std::to_string(w * 4 + 1) + " elements"));
  CHECK_THROWS_WITH(comm.reduce_scatter(at::zeros({w * 4}), at::zeros({4}, at::kDouble), ReduceOp::sum),
                    Catch::Contains("differ in dtype or device"));
  CHECK_THROWS_WITH(comm.all_gather(at::zeros({4}), at::zeros({w * 4 + 2})),
                    Catch::Contains("output has " + std::to_string(w * 4 + 2) + " elements"));
  const at::Tensor flat = at::zeros({w * 4 + 1});
  CHECK_THROWS_WITH(comm.all_gather(flat.narrow(0, comm.rank() * 4 + 1, 4), flat.narrow(0, 0, w * 4)),
                    Catch::Contains("not output's block"));
  CHECK_THROWS_WITH(comm.broadcast(at::zeros({2}), w), Catch::Contains("root " + std::to_string(w) + " is not a rank"));
  comm.barrier();
}

TEST_CASE("check_mpi: an MPI failure names the call, the rank and MPI's own text", "[dist]") {
  const int rank = World::instance().rank();
  CHECK_NOTHROW(tessera::dist::detail::check_mpi(MPI_SUCCESS, "MPI_Allreduce"));
  CHECK_THROWS_WITH(tessera::dist::detail::check_mpi(MPI_ERR_COUNT, "MPI_Allreduce"),
                    Catch::Contains("MPI_Allreduce failed on rank " + std::to_string(rank)) &&
                        Catch::Contains("invalid count"));
}
