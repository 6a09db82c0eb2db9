#pragma once
// defines: JobPlace, Job and JobScope: the engine's view of the job it runs in, without MPI headers.
// When tessera is built with MPI and a tessera::dist::World is alive, the job is MPI_COMM_WORLD (started by
// mpirun, mpiexec or srun); otherwise it is this process alone, a job of one rank, and every collective is
// the identity (dist::SelfCommunicator). Programs start MPI with a JobScope (tessera::main does).
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/engine/unit_engine.hpp"

namespace tessera {

namespace dist {
struct CollectiveBytes;  // dist/shape_communicator.hpp
}

struct JobPlace {
  int rank = 0;
  int size = 1;
  int local_rank = 0;   // among the ranks on this node: picks the node's GPU
  int local_size = 1;
  int num_nodes = 1;
};

namespace job {

JobPlace place();
// Communicators for the engine. shard_group_size: G ranks per shard group (1 = no sharding; the world size
// for world-wide sharding). Groups are consecutive ranks {0..G-1}, {G..2G-1}, ...; replicas are the ranks
// with the same position in each group. Collective over the job. Tensors on `device` pick the transport:
// NCCL for CUDA tensors when tessera was built with it and each rank has its own GPU, MPI otherwise.
UnitComms communicators(int shard_group_size, c10::Device device);
// Each rank's record to rank 0 (size()*n values there, empty elsewhere). Collective.
std::vector<std::int64_t> gather_to_root(std::span<const std::int64_t> record);
// Prints "[rank r/size] message" on stderr and ends every rank of the job with `code` (MPI_Abort).
[[noreturn]] void abort(int code, std::string_view message);

// One thing every rank of a job must see alike: compared by `value`, printed as `shown` ("bucket_cap_mb=25", or
// "data=a.bin (40000 bytes, ...)" for a value that is a fingerprint).
struct Fact {
  std::string key, value, shown;
};
// Collective: rank 0's facts reach every rank, which compares its own with them, key by key. When any rank's
// differ, every rank throws ConfigError("ranks disagree on <what>: rank r has <its shown> where rank 0 has
// <rank 0's>; <fix>") for the lowest such rank r and its first differing key, so the job ends at once, naming
// both values. Nothing in a job of one (or a dry run, or under a SoloScope).
void agree(std::string_view what, std::span<const Fact> facts, std::string_view fix);

}  // namespace job

// While one exists, this process runs as a job of one whatever the launcher started (place() is rank 0 of 1,
// collectives are the identity): for single-process reference runs inside a job (tests compare every rank's
// sharded result with one computed locally). Not thread-safe; nest freely.
class SoloScope {
 public:
  SoloScope();
  ~SoloScope();
  SoloScope(const SoloScope&) = delete;
  SoloScope& operator=(const SoloScope&) = delete;
};

// While one exists, this process plays rank `rank` of a job of `size` ranks (`ranks_per_node` to a node) on the meta
// device, for a dry run (predict/dry_run.hpp): place() is that rank, communicators() are ShapeCommunicators (no data
// moves; their bytes add up in bytes()), gather_to_root() returns this rank's record alone, and make_runtime()
// picks the meta device. `target`: the device the run is predicted for (kCPU or kCUDA), which picks the attention
// kernels the meta kernels imitate. Not thread-safe; one at a time (Error for a second).
class DryRunScope {
 public:
  DryRunScope(int rank, int size, int ranks_per_node, c10::DeviceType target);
  ~DryRunScope();
  DryRunScope(const DryRunScope&) = delete;
  DryRunScope& operator=(const DryRunScope&) = delete;
  const dist::CollectiveBytes& bytes() const { return *bytes_; }
  // The live scope's target, or nullopt outside a dry run.
  static std::optional<c10::DeviceType> active_target();

 private:
  std::shared_ptr<dist::CollectiveBytes> bytes_;
};

// Starts MPI for the program's lifetime when tessera has it, no World exists yet and the process was started by
// an MPI launcher (mpirun/mpiexec, or srun with more than one task: launched_by_mpi()); a plain process is a job
// of one without MPI. Does nothing otherwise. With collective_timeout_s > 0 the collective watchdog
// (dist/watchdog.hpp) is armed from before MPI starts (rank and size from the launcher's variables) to after
// MPI_Finalize, so a rank that never joins the job's first collectives or its end stops the job after that long.
bool launched_by_mpi();

class JobScope {
 public:
  explicit JobScope(double collective_timeout_s = 0);
  ~JobScope();
  JobScope(const JobScope&) = delete;
  JobScope& operator=(const JobScope&) = delete;

 private:
  std::shared_ptr<void> watch_;  // declared first: released last, after MPI_Finalize
  std::shared_ptr<void> world_;
  std::shared_ptr<void> watch_world_;
};

}  // namespace tessera
