// NcclCommunicator: every collective, blocking and async, for each dtype and op, on CUDA tensors of this rank's
// GPU, against values computed on the CPU. Rank r contributes (r+1) * [0, 1, ..., n-1]: small integers, exact in
// every dtype at these sizes, so each rank computes the expected result itself (in float64, rounded once).
// Also: ordering against the compute stream, polling, dropped Works, bfloat16, and the refusals. Checks come
// after the collectives, so a failure on one rank never leaves the others waiting.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/dist/nccl_communicator.hpp"
#include "tessera/dist/world.hpp"

using tessera::dist::NcclCommunicator;
using tessera::dist::NcclWork;
using tessera::dist::ReduceOp;
using tessera::dist::World;

tessera::dist::NcclCommunicator& nccl_comm();  // main.cpp: the communicator on this rank's GPU

namespace {

const std::vector<c10::ScalarType> all_dtypes{at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kLong, at::kInt};

at::Device gpu() { return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(nccl_comm().device())); }

at::TensorOptions on_gpu(c10::ScalarType dtype) { return at::TensorOptions().device(gpu()).dtype(dtype); }

// On the CPU; .to(gpu()) for the collectives.
at::Tensor contribution(int rank, std::int64_t n, c10::ScalarType dtype) {
  return (at::arange(n, at::kDouble) * (rank + 1)).to(dtype);
}

// op over the contributions of ranks 0 .. world-1, in float64, rounded once to dtype (on the CPU).
at::Tensor expected_reduce(int world, std::int64_t n, c10::ScalarType dtype, ReduceOp op) {
  at::Tensor acc = contribution(0, n, at::kDouble);
  for (int r = 1; r < world; ++r) {
    const at::Tensor next = contribution(r, n, at::kDouble);
    acc = op == ReduceOp::max ? at::maximum(acc, next) : acc + next;
  }
  if (op == ReduceOp::avg) acc = acc / world;
  return acc.to(dtype);
}

at::Tensor expected_gather(int world, std::int64_t n, c10::ScalarType dtype) {
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world; ++r) parts.push_back(contribution(r, n, dtype));
  return at::cat(parts);
}

bool integral(c10::ScalarType dtype) { return c10::isIntegralType(dtype, false); }

double tolerance(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return 1e-2;
    case at::kHalf: return 2e-3;
    case at::kFloat: return 1e-6;
    default: return 1e-12;
  }
}

// A GPU result against the CPU's: bit for bit for sum and max of these small integers; avg within the dtype's
// rounding (NCCL may scale by 1/W before summing).
bool matches(const at::Tensor& got_gpu, const at::Tensor& want, ReduceOp op) {
  const at::Tensor got = got_gpu.cpu();
  if (got.scalar_type() != want.scalar_type() || got.sizes() != want.sizes()) return false;
  if (op != ReduceOp::avg) return at::equal(got, want);
  return at::allclose(got.to(at::kDouble), want.to(at::kDouble), tolerance(want.scalar_type()), 1e-6);
}

std::string label(c10::ScalarType dtype, ReduceOp op, bool async) {
  const char* name = op == ReduceOp::sum ? "sum" : op == ReduceOp::avg ? "avg" : "max";
  return std::string(c10::toString(dtype)) + " " + name + (async ? " async" : " blocking");
}

}  // namespace

TEST_CASE("NcclCommunicator: rank, size and device agree with the World", "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  CHECK(comm.rank() == World::instance().rank());
  CHECK(comm.size() == World::instance().size());
  CHECK(comm.device() >= 0);
  CHECK(comm.nccl_comm() != nullptr);
  CHECK(comm.comm_stream() != nullptr);
  CHECK(comm.compute_stream() == nullptr);  // the legacy default stream: LibTorch's default current stream
}

TEST_CASE("NcclCommunicator: all_reduce sum/avg/max, every dtype, blocking and async", "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const std::int64_t n = 9;
  for (const auto dtype : all_dtypes)
    for (const auto op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (const bool async : {false, true}) {
        INFO(label(dtype, op, async));
        const at::Tensor t = contribution(comm.rank(), n, dtype).to(gpu()).view({1, n});
        if (op == ReduceOp::avg && integral(dtype)) {
          CHECK_THROWS_WITH(comm.all_reduce(t, op), Catch::Contains("would truncate"));
          continue;
        }
        if (async) {
          NcclWork work = comm.all_reduce_async(t, op);
          work.wait();
          CHECK(work.is_completed());
        } else {
          comm.all_reduce(t, op);
        }
        CHECK(matches(t.view(-1), expected_reduce(comm.size(), n, dtype, op), op));
      }
}

TEST_CASE("NcclCommunicator: reduce_scatter, every dtype, blocking and async", "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const std::int64_t n = 6;
  for (const auto dtype : all_dtypes)
    for (const auto op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
      for (const bool async : {false, true}) {
        if (op == ReduceOp::avg && integral(dtype)) continue;
        INFO(label(dtype, op, async));
        const at::Tensor input = contribution(comm.rank(), comm.size() * n, dtype).to(gpu());
        const at::Tensor output = at::zeros({n}, on_gpu(dtype));
        if (async)
          comm.reduce_scatter_async(input, output, op).wait();
        else
          comm.reduce_scatter(input, output, op);
        const at::Tensor want = expected_reduce(comm.size(), comm.size() * n, dtype, op).narrow(0, comm.rank() * n, n);
        CHECK(matches(output, want, op));
        CHECK(at::equal(input.cpu(), contribution(comm.rank(), comm.size() * n, dtype)));  // input left as it was
      }
}

TEST_CASE("NcclCommunicator: all_gather, every dtype, blocking and async, separate and in place", "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const std::int64_t n = 5;
  for (const auto dtype : all_dtypes)
    for (const bool async : {false, true}) {
      INFO(label(dtype, ReduceOp::sum, async));
      const at::Tensor input = contribution(comm.rank(), n, dtype).to(gpu());
      const at::Tensor output = at::zeros({comm.size(), n}, on_gpu(dtype));
      // The sharded-parameter layout: this rank's shard is its own block of the full flat buffer.
      const at::Tensor flat = at::zeros({comm.size() * n}, on_gpu(dtype));
      const at::Tensor shard = flat.narrow(0, comm.rank() * n, n);
      shard.copy_(input);
      if (async) {
        NcclWork separate = comm.all_gather_async(input, output);
        NcclWork in_place = comm.all_gather_async(shard, flat);
        in_place.wait();
        separate.wait();
      } else {
        comm.all_gather(input, output);
        comm.all_gather(shard, flat);
      }
      CHECK(at::equal(output.view(-1).cpu(), expected_gather(comm.size(), n, dtype)));
      CHECK(at::equal(flat.cpu(), expected_gather(comm.size(), n, dtype)));
    }
}

TEST_CASE("NcclCommunicator: broadcast from the first and the last rank, every dtype, blocking and polled",
          "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const std::int64_t n = 9;
  for (const auto dtype : all_dtypes)
    for (const int root : {0, comm.size() - 1})
      for (const bool async : {false, true}) {
        INFO(label(dtype, ReduceOp::sum, async) << " root " << root);
        const at::Tensor t =
            comm.rank() == root ? contribution(root, n, dtype).to(gpu()) : at::zeros({n}, on_gpu(dtype));
        if (async) {
          NcclWork work = comm.broadcast_async(t, root);
          while (!work.is_completed()) {
          }
        } else {
          comm.broadcast(t, root);
        }
        CHECK(at::equal(t.cpu(), contribution(root, n, dtype)));
      }
  CHECK(cudaGetLastError() == cudaSuccess);  // polling's cudaErrorNotReady is not left for LibTorch to find
}

TEST_CASE("NcclCommunicator: coalesced all_reduce over mixed dtypes and shapes", "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const std::vector<std::vector<std::int64_t>> shapes{{3, 4}, {5}, {}, {2, 2}, {7}, {1, 0}};
  const std::vector<c10::ScalarType> dtypes{at::kFloat, at::kBFloat16, at::kFloat, at::kLong, at::kHalf, at::kFloat};
  for (const auto op : {ReduceOp::sum, ReduceOp::max})
    for (const bool async : {false, true}) {
      INFO(label(at::kFloat, op, async));
      std::vector<at::Tensor> tensors;
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const std::int64_t numel = c10::multiply_integers(shapes[i]);
        tensors.push_back(contribution(comm.rank(), numel, dtypes[i]).to(gpu()).view(shapes[i]));
      }
      if (async)
        comm.all_reduce_async(tensors, op).wait();
      else
        comm.all_reduce(tensors, op);
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const at::Tensor want = expected_reduce(comm.size(), tensors[i].numel(), dtypes[i], op).view(shapes[i]);
        CHECK(matches(tensors[i], want, op));
      }
    }
}

TEST_CASE("NcclCommunicator: a collective sees the compute stream's earlier kernels, and later ones see it",
          "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const std::int64_t n = std::int64_t{1} << 22;  // 16 MiB of float32 per rank
  const at::Tensor input = at::zeros({n}, on_gpu(at::kFloat));
  const at::Tensor output = at::zeros({comm.size() * n}, on_gpu(at::kFloat));
  // Keep the compute stream busy, then write the input: a comm stream that did not wait would gather zeros.
  at::Tensor busy = at::rand({2048, 2048}, on_gpu(at::kFloat));
  for (int i = 0; i < 20; ++i) busy = at::tanh(at::mm(busy, busy));
  input.fill_(comm.rank() + 1);
  NcclWork work = comm.all_gather_async(input, output);
  work.wait();  // no host block: the compute stream waits
  const at::Tensor doubled = output * 2;  // queued after wait(): sees the gathered values
  // And the other way: a reduce that a later kernel on the compute stream reads right away.
  const at::Tensor sum = at::full({n}, comm.rank() + 1.0, on_gpu(at::kFloat));
  comm.all_reduce(sum, ReduceOp::sum);
  const at::Tensor sum_plus_one = sum + 1;

  at::Tensor want = at::empty({comm.size() * n}, at::kFloat);
  for (int q = 0; q < comm.size(); ++q) want.narrow(0, q * n, n).fill_(2.0 * (q + 1));
  CHECK(at::equal(doubled.cpu(), want));
  const double total = comm.size() * (comm.size() + 1) / 2.0;
  CHECK(at::equal(sum_plus_one.cpu(), at::full({n}, total + 1.0, at::kFloat)));
  CHECK(busy.isfinite().all().item<bool>());
}

TEST_CASE("NcclCommunicator: several async collectives in flight, waited out of order, polled or dropped",
          "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const std::int64_t n = 11;
  const at::Tensor a = contribution(comm.rank(), n, at::kFloat).to(gpu());
  const at::Tensor b = contribution(comm.rank(), n, at::kBFloat16).to(gpu());
  const at::Tensor c = contribution(comm.rank(), n, at::kDouble).to(gpu());
  const at::Tensor d = contribution(comm.rank(), n, at::kLong).to(gpu());
  std::vector<NcclWork> works;
  works.push_back(comm.all_reduce_async(a, ReduceOp::sum));
  works.push_back(comm.all_reduce_async(b, ReduceOp::avg));
  { NcclWork dropped = comm.all_reduce_async(c, ReduceOp::max); }  // the destructor waits
  NcclWork polled = comm.all_reduce_async(d, ReduceOp::sum);
  works[1].wait();
  works[0].wait();
  while (!polled.is_completed()) {
  }
  polled.wait();  // idempotent after completion
  CHECK(matches(a, expected_reduce(comm.size(), n, at::kFloat, ReduceOp::sum), ReduceOp::sum));
  CHECK(matches(b, expected_reduce(comm.size(), n, at::kBFloat16, ReduceOp::avg), ReduceOp::avg));
  CHECK(matches(c, expected_reduce(comm.size(), n, at::kDouble, ReduceOp::max), ReduceOp::max));
  CHECK(matches(d, expected_reduce(comm.size(), n, at::kLong, ReduceOp::sum), ReduceOp::sum));
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("NcclCommunicator: bfloat16 moves bit for bit and reduces in bfloat16", "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const std::int64_t n = 64;
  // Values that use every bit of bf16's mantissa, different on each rank, computable on every rank.
  const auto values = [n](int rank) {
    return (at::arange(n, at::kDouble) * 0.37 + rank).sin().mul(100).to(at::kBFloat16);
  };
  const at::Tensor input = values(comm.rank()).to(gpu());
  const at::Tensor gathered = at::empty({comm.size() * n}, on_gpu(at::kBFloat16));
  comm.all_gather(input, gathered);
  const at::Tensor maxed = input.clone();
  comm.all_reduce(maxed, ReduceOp::max);
  const at::Tensor summed = at::empty({n}, on_gpu(at::kBFloat16));
  comm.reduce_scatter(values(comm.rank()).repeat({comm.size()}).to(gpu()), summed, ReduceOp::sum);

  std::vector<at::Tensor> all;
  for (int r = 0; r < comm.size(); ++r) all.push_back(values(r));
  const at::Tensor stacked = at::stack(all);
  CHECK(gathered.scalar_type() == at::kBFloat16);
  CHECK(at::equal(gathered.cpu().view(at::kShort), at::cat(all).view(at::kShort)));  // bit for bit
  CHECK(at::equal(maxed.cpu(), std::get<0>(stacked.max(0))));
  const at::Tensor want_sum = stacked.to(at::kDouble).sum(0);
  if (comm.size() == 1)
    CHECK(at::equal(summed.cpu(), want_sum.to(at::kBFloat16)));
  else  // rounded to bf16 at each hop of the ring
    CHECK(at::allclose(summed.cpu().to(at::kDouble), want_sum, 1e-2, 1.0 * comm.size()));
}

TEST_CASE("NcclCommunicator: empty tensors and barrier", "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const at::Tensor empty = at::empty({0}, on_gpu(at::kFloat));
  const at::Tensor empty_out = at::empty({0}, on_gpu(at::kFloat));
  CHECK_NOTHROW(comm.all_reduce(empty, ReduceOp::sum));
  CHECK_NOTHROW(comm.all_gather(empty, empty_out));
  CHECK_NOTHROW(comm.reduce_scatter(empty, empty_out, ReduceOp::sum));
  CHECK_NOTHROW(comm.broadcast(empty, 0));
  CHECK_NOTHROW(comm.barrier());
}

TEST_CASE("NcclCommunicator: a second communicator, on its own compute stream, moved", "[dist][nccl]") {
  World& world = World::instance();
  cudaStream_t stream = nullptr;
  REQUIRE(cudaSetDevice(nccl_comm().device()) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  {
    NcclCommunicator first(world.comm(), nccl_comm().device(), stream);
    NcclCommunicator comm = std::move(first);
    CHECK(comm.compute_stream() == stream);
    const std::int64_t n = 7;
    const at::Tensor t = contribution(comm.rank(), n, at::kFloat).to(gpu());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // t was written on LibTorch's stream, not `stream`
    comm.all_reduce_async(t, ReduceOp::sum).wait();
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);  // wait() ordered `stream` after the collective
    CHECK(at::equal(t.cpu(), expected_reduce(comm.size(), n, at::kFloat, ReduceOp::sum)));
    comm.barrier();
  }
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
  // Every rank passes the same bad device, so every rank throws (after the id's broadcast, before NCCL's init).
  CHECK_THROWS_WITH(NcclCommunicator(world.comm(), 1 << 20), Catch::Contains("device_index 1048576"));
}

TEST_CASE("NcclCommunicator: bad arguments are refused with what was wrong", "[dist][nccl]") {
  NcclCommunicator& comm = nccl_comm();
  const int w = comm.size();
  const auto f32 = on_gpu(at::kFloat);
  CHECK_THROWS_AS(comm.all_reduce(at::zeros({3}), ReduceOp::sum), tessera::Error);
  CHECK_THROWS_WITH(comm.all_reduce(at::zeros({3}), ReduceOp::sum),
                    Catch::Contains("is on device cpu") && Catch::Contains("CUDA tensors"));
  CHECK_THROWS_WITH(comm.all_gather_async(at::zeros({3}), at::zeros({w * 3}, f32)), Catch::Contains("device cpu"));
  CHECK_THROWS_WITH(comm.all_reduce(at::zeros({3, 4}, f32).t(), ReduceOp::sum), Catch::Contains("not contiguous"));
  CHECK_THROWS_WITH(comm.all_reduce(at::zeros({3}, on_gpu(at::kBool)), ReduceOp::max), Catch::Contains("dtype Bool"));
  CHECK_THROWS_WITH(comm.all_reduce(at::Tensor(), ReduceOp::sum), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(comm.all_reduce(at::zeros({3}, on_gpu(at::kInt)), ReduceOp::avg),
                    Catch::Contains("would truncate"));
  CHECK_THROWS_WITH(comm.reduce_scatter(at::zeros({w * 4 + 1}, f32), at::zeros({4}, f32), ReduceOp::sum),
                    Catch::Contains("input has " + std::to_string(w * 4 + 1) + " elements"));
  CHECK_THROWS_WITH(comm.reduce_scatter(at::zeros({w * 4}, f32), at::zeros({4}, on_gpu(at::kDouble)), ReduceOp::sum),
                    Catch::Contains("differ in dtype"));
  const at::Tensor whole = at::zeros({w * 4}, f32);
  CHECK_THROWS_WITH(comm.reduce_scatter(whole, whole.narrow(0, 0, 4), ReduceOp::sum), Catch::Contains("share memory"));
  CHECK_THROWS_WITH(comm.all_gather(at::zeros({4}, f32), at::zeros({w * 4 + 2}, f32)),
                    Catch::Contains("output has " + std::to_string(w * 4 + 2) + " elements"));
  const at::Tensor flat = at::zeros({w * 4 + 1}, f32);
  CHECK_THROWS_WITH(comm.all_gather(flat.narrow(0, comm.rank() * 4 + 1, 4), flat.narrow(0, 0, w * 4)),
                    Catch::Contains("not output's block"));
  CHECK_THROWS_WITH(comm.broadcast(at::zeros({2}, f32), w),
                    Catch::Contains("root " + std::to_string(w) + " is not a rank"));
  const at::Tensor twice = at::zeros({3}, f32);
  const std::vector<at::Tensor> aliased{twice, twice};
  CHECK_THROWS_WITH(comm.all_reduce(aliased, ReduceOp::sum), Catch::Contains("share memory"));
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  if (devices > 1) {
    const at::Device other(at::kCUDA, static_cast<c10::DeviceIndex>((comm.device() + 1) % devices));
    CHECK_THROWS_WITH(comm.all_reduce(at::zeros({3}, at::TensorOptions().device(other)), ReduceOp::sum),
                      Catch::Contains("but this NcclCommunicator works on " + gpu().str()));
  }
  // Refusals happen before any NCCL call: the communicator goes on working.
  const at::Tensor t = contribution(comm.rank(), 3, at::kFloat).to(gpu());
  comm.all_reduce(t, ReduceOp::sum);
  CHECK(matches(t, expected_reduce(w, 3, at::kFloat, ReduceOp::sum), ReduceOp::sum));
  comm.barrier();
}
