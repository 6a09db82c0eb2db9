// implements: engine/job.hpp, over tessera::dist::World when tessera is built with MPI (the dry run's target is
// engine/target.hpp's, src/engine/target.cpp).
#include "tessera/engine/job.hpp"
#include "tessera/engine/target.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/dist/shape_communicator.hpp"
#include "tessera/dist/self_communicator.hpp"

#ifdef TESSERA_WITH_MPI
#include "tessera/dist/mpi_communicator.hpp"
#include "tessera/dist/watchdog.hpp"
#include "tessera/dist/world.hpp"
#endif
#ifdef TESSERA_WITH_NCCL
#include <cuda_runtime_api.h>

#include "tessera/dist/nccl_communicator.hpp"
#endif

namespace tessera::job {
namespace {

int solo_depth = 0;  // live SoloScopes

// The live DryRunScope's rank and job (its target: engine/target.hpp).
struct DryRun {
  JobPlace place;
  std::shared_ptr<dist::CollectiveBytes> bytes;
};
std::optional<DryRun> dry_run;

#ifdef TESSERA_WITH_MPI
dist::World* live_world() { return solo_depth > 0 ? nullptr : dist::World::current(); }
#endif

}  // namespace

int& solo_depth_ref() { return solo_depth; }
std::optional<DryRun>& dry_run_ref() { return dry_run; }

JobPlace place() {
  if (dry_run) return dry_run->place;
#ifdef TESSERA_WITH_MPI
  if (const dist::World* w = live_world())
    return JobPlace{w->rank(), w->size(), w->local_rank(), w->local_size(), w->num_nodes()};
#endif
  return JobPlace{};
}

UnitComms communicators(int shard_group_size, c10::Device device) {
  (void)device;
  const JobPlace p = place();
  if (dry_run) {  // as below, with groups of simulated ranks
    const int g = shard_group_size, group = p.rank / g, position = p.rank % g;
    auto shape = [&](int rank, int size) {
      return dist::AnyCommunicator::of(dist::ShapeCommunicator(rank, size, dry_run->bytes));
    };
    return UnitComms{shape(p.rank, p.size), shape(position, g), shape(group, p.size / g)};
  }
  if (p.size == 1) {
    const auto self = dist::AnyCommunicator::of(dist::SelfCommunicator{});
    return UnitComms{self, self, self};
  }
#ifdef TESSERA_WITH_MPI
  dist::World& world = dist::World::instance();
  const int g = shard_group_size;
  const int group = p.rank / g, position = p.rank % g;
#ifdef TESSERA_WITH_NCCL
  int gpus = 0;
  if (device.is_cuda() && cudaGetDeviceCount(&gpus) == cudaSuccess && gpus >= p.local_size) {
    const int index = device.index() < 0 ? 0 : device.index();
    auto nccl = [&](MPI_Comm comm) { return dist::AnyCommunicator::of(dist::NcclCommunicator(comm, index)); };
    dist::MpiCommunicator shard = world.split(group, p.rank), replica = world.split(position, p.rank);
    return UnitComms{nccl(world.comm()), nccl(shard.comm()), nccl(replica.comm())};
  }
#endif
  const auto self = dist::AnyCommunicator::of(dist::SelfCommunicator{});
  const auto world_comm = dist::AnyCommunicator::of(dist::MpiCommunicator(world.comm()));
  // Every rank takes the same branches, so the collective splits match up.
  const auto shard = g == 1 ? self : g == p.size ? world_comm : dist::AnyCommunicator::of(world.split(group, p.rank));
  const auto replica =
      g == p.size ? self : g == 1 ? world_comm : dist::AnyCommunicator::of(world.split(position, p.rank));
  return UnitComms{world_comm, shard, replica};
#else
  (void)shard_group_size;
  return {};
#endif
}

std::vector<std::int64_t> gather_to_root(std::span<const std::int64_t> record) {
  if (dry_run) return std::vector<std::int64_t>(record.begin(), record.end());
#ifdef TESSERA_WITH_MPI
  if (dist::World* w = live_world(); w && w->size() > 1) return w->gather_to_root(record);
#endif
  return std::vector<std::int64_t>(record.begin(), record.end());
}

namespace {

// Facts as bytes: each string as its length (8 bytes) and its bytes.
std::string encoded(std::span<const Fact> facts) {
  std::string out;
  const auto put = [&](const std::string& text) {
    const std::uint64_t n = text.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out += text;
  };
  for (const Fact& f : facts) {
    put(f.key);
    put(f.value);
    put(f.shown);
  }
  return out;
}

std::vector<Fact> decoded(std::string_view bytes) {
  std::vector<Fact> out;
  const auto take = [&](std::string& text) {
    std::uint64_t n = 0;
    if (bytes.size() < sizeof n) throw Error("agree: a damaged list of facts from rank 0");
    std::memcpy(&n, bytes.data(), sizeof n);
    bytes.remove_prefix(sizeof n);
    if (n > bytes.size()) throw Error("agree: a damaged list of facts from rank 0");
    text.assign(bytes.substr(0, n));
    bytes.remove_prefix(n);
  };
  while (!bytes.empty()) {
    Fact f;
    take(f.key);
    take(f.value);
    take(f.shown);
    out.push_back(std::move(f));
  }
  return out;
}

// "rank r has X where rank 0 has Y" for this rank's first fact that differs from rank 0's; empty when none does.
std::string first_difference(std::span<const Fact> mine, std::span<const Fact> root, int rank) {
  const auto find = [](std::span<const Fact> facts, const std::string& key) -> const Fact* {
    for (const Fact& f : facts)
      if (f.key == key) return &f;
    return nullptr;
  };
  const std::string me = "rank " + std::to_string(rank);
  for (const Fact& r : root) {
    const Fact* m = find(mine, r.key);
    if (!m) return me + " has no " + r.key + " where rank 0 has " + r.shown;
    if (m->value != r.value) return me + " has " + m->shown + " where rank 0 has " + r.shown;
  }
  for (const Fact& m : mine)
    if (!find(root, m.key)) return me + " has " + m.shown + " where rank 0 has no " + m.key;
  return {};
}

}  // namespace

void agree(std::string_view what, std::span<const Fact> facts, std::string_view fix) {
#ifdef TESSERA_WITH_MPI
  if (dry_run) return;
  const dist::World* w = live_world();
  if (!w || w->size() == 1) return;
  std::string root = encoded(facts);
  w->broadcast(root, 0);
  std::string difference = first_difference(facts, decoded(root), w->rank());
  const int first = w->min(difference.empty() ? w->size() : w->rank());
  if (first == w->size()) return;
  w->broadcast(difference, first);
  throw ConfigError("ranks disagree on " + std::string(what) + ": " + difference + "; " + std::string(fix));
#else
  (void)what, (void)facts, (void)fix;
#endif
}

void abort(int code, std::string_view message) {
#ifdef TESSERA_WITH_MPI
  if (const dist::World* w = live_world()) w->abort(code, message);
#endif
  std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::_Exit(code == 0 ? 1 : code);
}

}  // namespace tessera::job

namespace tessera {

SoloScope::SoloScope() { ++job::solo_depth_ref(); }
SoloScope::~SoloScope() { --job::solo_depth_ref(); }

DryRunScope::DryRunScope(int rank, int size, int ranks_per_node, c10::DeviceType target)
    : bytes_(std::make_shared<dist::CollectiveBytes>()) {
  auto& dry = job::dry_run_ref();
  if (dry) throw Error("a dry run is already in progress in this process; run one at a time");
  if (size < 1 || rank < 0 || rank >= size || ranks_per_node < 1)
    throw Error("a dry run needs 0 <= rank < size and ranks_per_node >= 1 (got rank " + std::to_string(rank) +
                " of " + std::to_string(size) + ", " + std::to_string(ranks_per_node) + " per node)");
  const int per_node = std::min(ranks_per_node, size);
  dry = job::DryRun{JobPlace{rank, size, rank % per_node, per_node, (size + per_node - 1) / per_node}, bytes_};
  detail::set_dry_run_target(target);
}
DryRunScope::~DryRunScope() {
  job::dry_run_ref().reset();
  detail::set_dry_run_target(std::nullopt);
}
std::optional<c10::DeviceType> DryRunScope::active_target() { return dry_run_target(); }

bool launched_by_mpi() {
  // What mpirun/mpiexec (Open MPI, MPICH's hydra) and srun (PMI-2, PMIx) put in every rank's environment.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(var)) return true;
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  return tasks && std::atoi(tasks) > 1;
}

namespace {

#ifdef TESSERA_WITH_MPI
// The launcher's word for this rank's place, before MPI can say it: (rank, size), or (0, 1) when none says.
std::pair<int, int> launcher_place() {
  const auto number = [](std::initializer_list<const char*> vars) -> int {
    for (const char* var : vars)
      if (const char* v = std::getenv(var)) return std::atoi(v);
    return -1;
  };
  const int rank = number({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
  const int size = number({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  return rank >= 0 && size > rank ? std::pair{rank, size} : std::pair{0, 1};
}

std::shared_ptr<void> armed(double timeout_s, int rank, int size) {
  return std::make_shared<dist::watchdog::Armed>(timeout_s, rank, size);
}
#endif

}  // namespace

JobScope::JobScope(double collective_timeout_s) {
#ifdef TESSERA_WITH_MPI
  // A plain start is a job of one: MPI (and its helper process, ~0.5 s) starts only under a launcher.
  if (dist::World::current() || !launched_by_mpi()) return;
  if (collective_timeout_s > 0) {
    const auto [rank, size] = launcher_place();
    watch_ = armed(collective_timeout_s, rank, size);
  }
  auto world = std::make_shared<dist::World>();
  if (collective_timeout_s > 0) watch_world_ = armed(collective_timeout_s, world->rank(), world->size());
  world_ = std::move(world);
#else
  (void)collective_timeout_s;
#endif
}

JobScope::~JobScope() = default;

}  // namespace tessera
