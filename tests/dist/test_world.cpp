// World: ranks, node placement, gather_to_root and split, at whatever size the job has (1, 2, 4 ranks).
// Every check comes after the collectives of its test case, so a failure on one rank never leaves the others
// waiting in a collective it skipped.
#include <ATen/ATen.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/dist/world.hpp"

using tessera::dist::ReduceOp;
using tessera::dist::World;

TEST_CASE("World: rank and size agree with MPI_COMM_WORLD; instance() is the one World", "[dist]") {
  World& world = World::instance();
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(world.rank() == rank);
  CHECK(world.size() == size);
  CHECK(world.comm() == MPI_COMM_WORLD);
  CHECK_THROWS_WITH(World(), Catch::Contains("exists already") && Catch::Contains("World::instance()"));
  world.barrier();
}

TEST_CASE("World: node placement matches the host names", "[dist]") {
  World& world = World::instance();
  // Each rank's host name, local rank and node index, gathered everywhere.
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  std::vector<char> hosts(host.size() * static_cast<std::size_t>(world.size()));
  MPI_Allgather(host.data(), static_cast<int>(host.size()), MPI_CHAR, hosts.data(), static_cast<int>(host.size()),
                MPI_CHAR, MPI_COMM_WORLD);
  const std::array<int, 2> mine{world.node_index(), world.local_rank()};
  std::vector<int> placement(2 * static_cast<std::size_t>(world.size()));
  MPI_Allgather(mine.data(), 2, MPI_INT, placement.data(), 2, MPI_INT, MPI_COMM_WORLD);

  std::set<std::string> host_names;
  std::set<std::pair<int, int>> slots;
  int on_my_node = 0;
  for (int q = 0; q < world.size(); ++q) {
    const std::string name(hosts.data() + q * host.size());
    host_names.insert(name);
    slots.emplace(placement[2 * q], placement[2 * q + 1]);
    if (name == host.data()) {
      ++on_my_node;
      CHECK(placement[2 * q] == world.node_index());
    }
  }
  CHECK(world.num_nodes() == static_cast<int>(host_names.size()));
  CHECK(world.local_size() == on_my_node);
  CHECK(slots.size() == static_cast<std::size_t>(world.size()));  // (node, local rank) names one rank
  CHECK(world.local_rank() >= 0);
  CHECK(world.local_rank() < world.local_size());
  if (world.num_nodes() == 1) {  // every job of this suite: one machine
    CHECK(world.local_rank() == world.rank());
    CHECK(world.local_size() == world.size());
    CHECK(world.node_index() == 0);
  }
}

TEST_CASE("World::gather_to_root: every rank's record on rank 0, in rank order", "[dist]") {
  World& world = World::instance();
  const std::int64_t r = world.rank();
  const std::vector<std::int64_t> record{r, 10 * r, -r - (std::int64_t{1} << 40)};
  const std::vector<std::int64_t> all = world.gather_to_root(record);
  if (world.rank() == 0) {
    REQUIRE(all.size() == 3 * static_cast<std::size_t>(world.size()));
    for (std::int64_t q = 0; q < world.size(); ++q) {
      CHECK(all[3 * q] == q);
      CHECK(all[3 * q + 1] == 10 * q);
      CHECK(all[3 * q + 2] == -q - (std::int64_t{1} << 40));
    }
  } else {
    CHECK(all.empty());
  }
  CHECK(world.gather_to_root({}).empty());
}

TEST_CASE("World::gather_to_root: records of different lengths throw on every rank", "[dist]") {
  World& world = World::instance();
  if (world.size() == 1) return;  // one rank: lengths cannot differ
  const std::vector<std::int64_t> record(static_cast<std::size_t>(world.rank()), 7);
  CHECK_THROWS_WITH(world.gather_to_root(record), Catch::Contains("different lengths") &&
                                                      Catch::Contains("this rank " + std::to_string(world.rank())));
}

TEST_CASE("World::split: groups by color, ordered by key, and communicate among themselves", "[dist]") {
  World& world = World::instance();
  const int color = world.rank() % 2;
  tessera::dist::MpiCommunicator group = world.split(color, -world.rank());  // key -rank: reversed order
  std::vector<int> members;                                                // world ranks of my color, by key
  for (int q = world.size() - 1; q >= 0; --q)
    if (q % 2 == color) members.push_back(q);
  at::Tensor t = at::full({3}, world.rank() + 1, at::kLong);
  group.all_reduce(t, ReduceOp::sum);
  std::int64_t want = 0;
  for (int q : members) want += q + 1;
  CHECK(group.size() == static_cast<int>(members.size()));
  CHECK(members[static_cast<std::size_t>(group.rank())] == world.rank());
  CHECK(at::equal(t, at::full({3}, want, at::kLong)));
}

TEST_CASE("World::split: a negative color throws on every rank", "[dist]") {
  World& world = World::instance();
  CHECK_THROWS_WITH(world.split(world.rank() == 0 ? -1 : 0, 0), Catch::Contains("color -1 is negative"));
}

TEST_CASE("World::broadcast and min: the root's bytes and the least value reach every rank", "[dist]") {
  World& world = World::instance();
  const int root = world.size() - 1;
  std::string bytes = world.rank() == root ? std::string("from the last rank\0with a zero", 30) : "other";
  world.broadcast(bytes, root);
  const int least = world.min(10 + world.rank());
  CHECK(bytes == std::string("from the last rank\0with a zero", 30));
  CHECK(least == 10);
}
