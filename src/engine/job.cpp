// implements: engine/job.hpp, over tessera::dist::World when tessera is built with MPI.
#include "tessera/engine/job.hpp"

#include <cstdio>
#include <cstdlib>

#include "tessera/dist/self_communicator.hpp"

#ifdef TESSERA_WITH_MPI
#include "tessera/dist/mpi_communicator.hpp"
#include "tessera/dist/world.hpp"
#endif
#ifdef TESSERA_WITH_NCCL
#include <cuda_runtime_api.h>

#include "tessera/dist/nccl_communicator.hpp"
#endif

namespace tessera::job {
namespace {

int solo_depth = 0;  // live SoloScopes

#ifdef TESSERA_WITH_MPI
dist::World* live_world() { return solo_depth > 0 ? nullptr : dist::World::current(); }
#endif

}  // namespace

int& solo_depth_ref() { return solo_depth; }

JobPlace place() {
#ifdef TESSERA_WITH_MPI
  if (const dist::World* w = live_world())
    return JobPlace{w->rank(), w->size(), w->local_rank(), w->local_size(), w->num_nodes()};
#endif
  return JobPlace{};
}

UnitComms communicators(int shard_group_size, c10::Device device) {
  (void)device;
  const JobPlace p = place();
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
#ifdef TESSERA_WITH_MPI
  if (dist::World* w = live_world(); w && w->size() > 1) return w->gather_to_root(record);
#endif
  return std::vector<std::int64_t>(record.begin(), record.end());
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

bool launched_by_mpi() {
  // What mpirun/mpiexec (Open MPI, MPICH's hydra) and srun (PMI-2, PMIx) put in every rank's environment.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(var)) return true;
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  return tasks && std::atoi(tasks) > 1;
}

JobScope::JobScope() {
#ifdef TESSERA_WITH_MPI
  // A plain start is a job of one: MPI (and its helper process, ~0.5 s) starts only under a launcher.
  if (!dist::World::current() && launched_by_mpi()) world_ = std::make_shared<dist::World>();
#endif
}

JobScope::~JobScope() = default;

}  // namespace tessera
