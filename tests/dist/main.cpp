// The Catch2 main of tessera_dist_tests: the World lives around the whole session (MPI starts once per
// process), and the job's exit status is the same on every rank: failed if any rank saw a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tessera/dist/world.hpp"

int main(int argc, char** argv) {
  tessera::dist::World world;
  int failed = Catch::Session().run(argc, argv);
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, world.comm());
  return failed == 0 ? 0 : 1;
}
