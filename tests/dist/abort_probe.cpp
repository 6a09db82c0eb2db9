// abort_probe MESSAGE: rank 1 ends the job with World::abort(3, MESSAGE) while every other rank waits in a
// barrier that rank 1 never reaches. tests/dist/expect_fail_once.sh checks that the job ends at once, non-zero,
// with MESSAGE printed once.
#include <chrono>
#include <cstdio>
#include <thread>

#include "tessera/dist/world.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: abort_probe MESSAGE (run it under mpiexec -n 3)\n");
    return 2;
  }
  tessera::dist::World world;
  if (world.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the others block in the barrier first
    world.abort(3, argv[1]);
  }
  world.barrier();
  std::fprintf(stderr, "rank %d passed a barrier that rank 1 never reached\n", world.rank());
  return 0;
}
