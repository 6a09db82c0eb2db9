// The Catch2 main of tessera_dist_tests: the World lives around the whole session (MPI starts once per
// process), and the job's exit status is the same on every rank: failed if any rank saw a failure.
#include "catch_session.hpp"

#include "tessera/dist/world.hpp"

int main(int argc, char** argv) {
  tessera::dist::World world;
  int failed = tessera::test::run_catch_session(argc, argv);
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, world.comm());
  return failed == 0 ? 0 : 1;
}
