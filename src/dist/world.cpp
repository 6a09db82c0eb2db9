#include "tessera/dist/world.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/dist/watchdog.hpp"

namespace tessera::dist {

namespace {

using detail::check_mpi;

World* live_world = nullptr;  // MPI's state is per process, so is the World that owns it

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return std::to_string(level);
}

}  // namespace

World::World() {
  if (live_world)
    throw Error("a tessera::dist::World exists already in this process (rank " + std::to_string(live_world->rank()) +
                "); reach it with World::instance() instead of making another");
  int initialized = 0, finalized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  check_mpi(MPI_Finalized(&finalized), "MPI_Finalized");
  if (finalized)
    throw Error("MPI was finalised earlier in this process and cannot start again; make one tessera::dist::World "
                "at the top of main() and keep it until the end");
  int provided = MPI_THREAD_SINGLE;
  const watchdog::Guard in_flight("MPI start (MPI_Init_thread and the World's communicators)", 0);
  if (initialized) {
    check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  } else {
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owns_mpi_ = true;
  }
  try {
    if (provided < MPI_THREAD_FUNNELED)
      throw Error("MPI provides thread level " + thread_level_name(provided) +
                  ", below the MPI_THREAD_FUNNELED tessera needs (LibTorch runs worker threads next to MPI); " +
                  (owns_mpi_ ? "use an MPI built with thread support" : "initialise MPI with MPI_Init_thread"));
    MPI_Comm dup = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
    comm_ = detail::OwnedComm(dup);
    check_mpi(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm_.get(), &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_.get(), &size_), "MPI_Comm_size");

    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(comm_.get(), MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    const detail::OwnedComm node_comm(node);
    check_mpi(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(node, &local_size_), "MPI_Comm_size");
    // A node is named by its lowest world rank: that of its local rank 0 (the split's key is the world rank).
    int leader = rank_;
    check_mpi(MPI_Bcast(&leader, 1, MPI_INT, 0, node), "MPI_Bcast");
    std::vector<int> leaders(static_cast<std::size_t>(size_));
    check_mpi(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm_.get()), "MPI_Allgather");
    std::sort(leaders.begin(), leaders.end());
    leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
    num_nodes_ = static_cast<int>(leaders.size());
    node_index_ = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), leader) - leaders.begin());
  } catch (...) {
    comm_ = detail::OwnedComm();
    if (owns_mpi_) MPI_Finalize();
    throw;
  }
  live_world = this;
}

World::~World() {
  live_world = nullptr;
  const watchdog::Guard in_flight("MPI_Finalize", 0);  // it waits for every rank to come
  comm_ = detail::OwnedComm();  // freed while MPI still runs
  if (owns_mpi_) MPI_Finalize();
}

World& World::instance() {
  if (!live_world)
    throw Error("no tessera::dist::World exists in this process; make one at the top of main() "
                "(tessera::dist::World world;) before using tessera::dist");
  return *live_world;
}

World* World::current() noexcept { return live_world; }

void World::barrier() const {
  const watchdog::Guard in_flight("barrier", 0);
  check_mpi(MPI_Barrier(comm_.get()), "MPI_Barrier");
}

void World::abort(int code, std::string_view message) const {
  const int status = code == 0 ? 1 : code;
  std::fprintf(stderr, "[rank %d/%d] %.*s\n", rank_, size_, static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; should an MPI ever let it, this rank still ends
}

std::vector<std::int64_t> World::gather_to_root(std::span<const std::int64_t> record) const {
  // Every rank checks the lengths, so a mismatch throws on all of them rather than hanging the others.
  const auto n = static_cast<std::int64_t>(record.size());
  const watchdog::Guard in_flight("gather", n * static_cast<std::int64_t>(sizeof(std::int64_t)));
  std::int64_t bounds[2] = {n, -n};  // max over ranks of (n, -n) = (longest, -shortest)
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_INT64_T, MPI_MAX, comm_.get()), "MPI_Allreduce");
  if (bounds[0] != -bounds[1])
    throw Error("gather_to_root: ranks give records of different lengths (" + std::to_string(-bounds[1]) + " to " +
                std::to_string(bounds[0]) + " values; this rank " + std::to_string(n) +
                "); every rank must send the same record layout");
  if (n > MpiCommunicator::max_mpi_count)
    throw Error("gather_to_root: a record of " + std::to_string(n) +
                " values is beyond what it is for (small per-rank records); move large data with an MpiCommunicator");
  std::vector<std::int64_t> all(rank_ == 0 ? static_cast<std::size_t>(n * size_) : 0);
  check_mpi(MPI_Gather(record.data(), static_cast<int>(n), MPI_INT64_T, all.data(), static_cast<int>(n), MPI_INT64_T,
                       0, comm_.get()),
            "MPI_Gather");
  return all;
}

MpiCommunicator World::split(int color, int key) const {
  // Checked on every rank together, so a bad color throws everywhere instead of leaving the others waiting.
  int lowest = color;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, comm_.get()), "MPI_Allreduce");
  if (lowest < 0)
    throw Error("World::split: color " + std::to_string(lowest) +
                " is negative; give every rank a group number >= 0 (ranks with the same color form one group)");
  const watchdog::Guard in_flight("MPI_Comm_split", 0);
  MPI_Comm group = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_.get(), color, key, &group), "MPI_Comm_split");
  return MpiCommunicator(detail::OwnedComm(group));
}

void World::broadcast(std::string& bytes, int root) const {
  std::int64_t n = static_cast<std::int64_t>(bytes.size());
  const watchdog::Guard in_flight("broadcast", n);
  check_mpi(MPI_Bcast(&n, 1, MPI_INT64_T, root, comm_.get()), "MPI_Bcast");
  if (n < 0 || n > MpiCommunicator::max_mpi_count)
    throw Error("World::broadcast: rank " + std::to_string(root) + " sends " + std::to_string(n) +
                " bytes, beyond what it is for (small records); move large data with an MpiCommunicator");
  bytes.resize(static_cast<std::size_t>(n));
  check_mpi(MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_CHAR, root, comm_.get()), "MPI_Bcast");
}

int World::min(int value) const {
  const watchdog::Guard in_flight("all_reduce", static_cast<std::int64_t>(sizeof value));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MIN, comm_.get()), "MPI_Allreduce");
  return value;
}

}  // namespace tessera::dist
