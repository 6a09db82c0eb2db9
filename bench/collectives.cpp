// collectives: MpiCommunicator's all_reduce, all_gather and reduce_scatter against the raw MPI calls
// (MPI_Allreduce in place, MPI_Allgather, MPI_Reduce_scatter_block) on the same float32 buffers.
//
//   mpiexec -n 2 build/bench/collectives [iterations=10] [warmup=3]
//
// A size is the whole buffer (nccl-tests' convention): all_reduce's tensor, all_gather's output,
// reduce_scatter's input. Bus bandwidth (GB/s, 1e9 bytes/s) as nccl-tests defines it, comparable across
// operations and world sizes W: all_reduce size/t * 2(W-1)/W; all_gather, reduce_scatter size/t * (W-1)/W
// (size/t itself when W = 1). Every iteration times raw and ours (in alternating order), each after a
// barrier; one time is the slowest rank's; the table shows medians.
// Last line: `min_ratio_to_raw: X` = min over rows of ours / raw bus bandwidth (1.0: no overhead).
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/dist/world.hpp"

namespace {

using tessera::dist::MpiCommunicator;
using tessera::dist::ReduceOp;
using tessera::dist::World;
using tessera::dist::detail::check_mpi;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds `call` took on the slowest rank, all ranks starting together.
double timed(World& world, const std::function<void()>& call) {
  world.barrier();
  const double start = MPI_Wtime();
  call();
  double seconds = MPI_Wtime() - start;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, world.comm()), "MPI_Allreduce");
  return seconds;
}

struct Row {
  std::string op;
  std::int64_t mib;
  double raw_gbs;
  double ours_gbs;
};

std::int64_t arg(int argc, char** argv, std::string_view key, std::int64_t fallback) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.size() > key.size() && a.substr(0, key.size()) == key && a[key.size()] == '=')
      return std::stoll(std::string(a.substr(key.size() + 1)));
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  World world;
  try {
    const std::int64_t iterations = arg(argc, argv, "iterations", 10), warmup = arg(argc, argv, "warmup", 3);
    if (iterations < 1 || warmup < 0)
      throw tessera::ConfigError("iterations=" + std::to_string(iterations) + " warmup=" + std::to_string(warmup) +
                                 ": give iterations >= 1 and warmup >= 0");
    MpiCommunicator comm(world.comm());
    const int w = world.size();
    const double ring = w > 1 ? double(w - 1) / w : 1.0;  // (W-1)/W: the share of the data each link carries
    std::vector<Row> rows;
    for (const std::string op : {"all_reduce", "all_gather", "reduce_scatter"}) {
      for (const std::int64_t mib : {1, 16, 64}) {
        const std::int64_t n = (mib << 20) / 4;  // float32 elements in the whole buffer (a multiple of W)
        const std::int64_t block = n / w;
        const int count = static_cast<int>(op == "all_reduce" ? n : block);
        const at::Tensor whole = at::zeros({n}), part = at::zeros({block});
        std::function<void()> raw, ours;
        if (op == "all_reduce") {
          raw = [&] {
            check_mpi(MPI_Allreduce(MPI_IN_PLACE, whole.data_ptr(), count, MPI_FLOAT, MPI_SUM, world.comm()),
                      "MPI_Allreduce");
          };
          ours = [&] { comm.all_reduce(whole, ReduceOp::sum); };
        } else if (op == "all_gather") {
          raw = [&] {
            check_mpi(MPI_Allgather(part.data_ptr(), count, MPI_FLOAT, whole.data_ptr(), count, MPI_FLOAT, world.comm()),
                      "MPI_Allgather");
          };
          ours = [&] { comm.all_gather(part, whole); };
        } else {
          raw = [&] {
            check_mpi(MPI_Reduce_scatter_block(whole.data_ptr(), part.data_ptr(), count, MPI_FLOAT, MPI_SUM,
                                               world.comm()),
                      "MPI_Reduce_scatter_block");
          };
          ours = [&] { comm.reduce_scatter(whole, part, ReduceOp::sum); };
        }
        for (std::int64_t i = 0; i < warmup; ++i) {
          timed(world, raw);
          timed(world, ours);
        }
        std::vector<double> raw_s, ours_s;
        for (std::int64_t i = 0; i < iterations; ++i) {  // who goes first alternates: neither gets warmer caches
          if (i % 2 == 0) raw_s.push_back(timed(world, raw));
          ours_s.push_back(timed(world, ours));
          if (i % 2 == 1) raw_s.push_back(timed(world, raw));
        }
        const double bus = double(mib << 20) / 1e9 * (op == "all_reduce" ? 2 * ring : ring);
        rows.push_back({op, mib, bus / median(raw_s), bus / median(ours_s)});
      }
    }
    if (world.rank() == 0) {
      std::printf("collectives: %d ranks, float32, median of %lld iterations, bus bandwidth GB/s\n", w,
                  static_cast<long long>(iterations));
      std::printf("%-16s %8s %10s %12s %8s\n", "op", "size", "raw MPI", "tessera", "ratio");
      double min_ratio = 1e300;
      for (const Row& r : rows) {
        const double ratio = r.ours_gbs / r.raw_gbs;
        min_ratio = std::min(min_ratio, ratio);
        std::printf("%-16s %4lld MiB %10.2f %12.2f %8.3f\n", r.op.c_str(), static_cast<long long>(r.mib), r.raw_gbs,
                    r.ours_gbs, ratio);
      }
      std::printf("min_ratio_to_raw: %.3f\n", min_ratio);
    }
  } catch (const std::exception& e) {
    world.abort(1, e.what());
  }
  return 0;
}
