// The Catch2 main of tessera_nccl_tests: the World lives around the whole session (MPI starts once per
// process), then one NcclCommunicator on this rank's GPU (local rank modulo the GPUs it sees) that the test
// cases share, destroyed before the World. The job's exit status is the same on every rank: failed if any
// rank saw a failure.
#include <cstdio>
#include <optional>

#include "catch_session.hpp"
#include "tessera/dist/nccl_communicator.hpp"
#include "tessera/dist/world.hpp"

namespace {
std::optional<tessera::dist::NcclCommunicator> shared_comm;
constexpr int kSkipped = 77;  // SKIP_RETURN_CODE of dist.nccl.np1 (tests/TesseraTestNccl.cmake)
}  // namespace

// The communicator of the test cases (test_nccl_communicator.cpp).
tessera::dist::NcclCommunicator& nccl_comm() { return *shared_comm; }

int main(int argc, char** argv) {
  tessera::dist::World world;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    // Every build has NCCL now (the CUDA wheels); without a GPU there is nothing to run: ctest reports a skip.
    std::fprintf(stderr, "tessera_nccl_tests: rank %d sees no CUDA device; skipped (run it on a GPU node)\n",
                 world.rank());
    return kSkipped;
  }
  shared_comm.emplace(world.comm(), world.local_rank() % devices);
  int failed = tessera::test::run_catch_session(argc, argv);
  shared_comm.reset();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, world.comm());
  return failed == 0 ? 0 : 1;
}
