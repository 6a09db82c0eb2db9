#pragma once
// defines: World, this process's place in the job: MPI's lifetime (MPI_Init_thread in the constructor,
// MPI_Finalize in the destructor), its rank on the job and on its node, job-wide abort, and sub-groups.
//
// One World per process, made at the top of main() and destroyed last (after every MpiCommunicator):
//   int main() {
//     tessera::dist::World world;                           // a plain ./prog is a job of one rank
//     tessera::dist::MpiCommunicator comm(world.comm());
//     ...
//   }
// Code that was not handed the World reaches it with World::instance(). MPI's state is per process and
// cannot be started twice, which is why this one object is reachable globally.
//
// Launchers: a plain process (size 1), mpirun/mpiexec, and Slurm's srun (with an MPI built for PMIx/PMI2)
// all work alike: every figure comes from MPI, none from launcher variables (OMPI_*, SLURM_*).
// Threads: MPI runs at MPI_THREAD_FUNNELED: only the thread that made the World calls MPI. LibTorch's
// intra-op worker threads never do, and async collectives are started and waited on from that thread.
// If MPI was initialised before the World (by the caller), the World uses it and leaves finalising to them.
// Starting MPI, making the World's communicators and MPI_Finalize run under the collective watchdog
// (dist/watchdog.hpp) when it is armed: a rank that never comes ends the job instead of hanging it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dist/mpi_communicator.hpp"  // and <mpi.h>, after checking that MPI is there

namespace tessera::dist {

class World {
 public:
  // Initialises MPI (unless the caller already did); tessera::Error if a World exists already, if MPI was
  // finalised before, or if MPI cannot give MPI_THREAD_FUNNELED.
  World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  ~World();

  // The live World; tessera::Error when there is none.
  static World& instance();
  // The live World, or nullptr when there is none (code that also runs without one).
  static World* current() noexcept;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank among the processes sharing this node's memory (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), and
  // how many there are: local_rank picks the node's GPU.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // Nodes are numbered 0 .. num_nodes()-1 in the order of their lowest world rank.
  int node_index() const { return node_index_; }
  int num_nodes() const { return num_nodes_; }
  // MPI_COMM_WORLD, to build communicators from (MpiCommunicator duplicates what it is given).
  MPI_Comm comm() const { return MPI_COMM_WORLD; }

  void barrier() const;

  // Ends the whole job: prints "[rank r/size] message" once to stderr, then MPI_Abort(MPI_COMM_WORLD, code),
  // which makes the launcher end every rank. code is the exit status (0 becomes 1: an abort is no success).
  [[noreturn]] void abort(int code, std::string_view message) const;

  // Small per-rank records (a memory snapshot's counters) to rank 0. Every rank gives the same number n of
  // values (tessera::Error on every rank otherwise). Returns size()*n values on rank 0, rank q's record at
  // [q*n, (q+1)*n); an empty vector on the other ranks.
  std::vector<std::int64_t> gather_to_root(std::span<const std::int64_t> record) const;

  // Collective: ranks giving the same color (>= 0) form one communicator, ordered by key (ties by world
  // rank), e.g. color = rank / group_size for hybrid sharding's groups of group_size ranks.
  MpiCommunicator split(int color, int key) const;

  // Collective: every rank gets `root`'s bytes in `bytes` (any length; a few kB in practice).
  void broadcast(std::string& bytes, int root) const;
  // Collective: the least of every rank's `value`.
  int min(int value) const;

 private:
  detail::OwnedComm comm_;  // MPI_COMM_WORLD's duplicate for World's own calls, errors returned not fatal
  bool owns_mpi_ = false;   // MPI_Init_thread was ours, so MPI_Finalize is too
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int node_index_ = 0;
  int num_nodes_ = 1;
};

}  // namespace tessera::dist
