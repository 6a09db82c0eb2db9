#pragma once
// defines: CheckpointDirLock, a run's hold on its checkpoint_dir from its start to its end (engine/train_state.hpp
// writes the checkpoints). Taken before step 1, so that what would fail at the first checkpoint fails at once:
//   created   when absent, by rank 0
//   writable  every rank creates and removes a probe file there (a read-only mount, an immutable directory, a
//             symbolic-link loop, permissions: refused before any step is spent)
//   locked    rank 0 holds flock(LOCK_EX) on DIR/.tessera-lock, which names its pid and host: a second run given the
//             same directory is refused naming the holder (two runs in one directory delete each other's
//             checkpoints: keep_last, the leftovers of a "killed" write). The lock ends with the process, however it
//             ends; a lock file left by a killed run is taken over by the next.
#include <c10/core/Device.h>

#include <filesystem>

#include "tessera/dist/any_communicator.hpp"

namespace tessera {

class CheckpointDirLock {
 public:
  // Collective over `world` (an empty one: this process alone); `device`: where its collectives take tensors.
  // Throws ConfigError on every rank, "checkpoint_dir=DIR: " and the failing rank's reason and the fix; a directory
  // this call created is removed again then. A file system without flock (NFS without lockd) is used unlocked,
  // with a line on stderr saying so.
  CheckpointDirLock(const std::filesystem::path& dir, dist::AnyCommunicator world, c10::Device device);
  // Removes the lock file and releases the lock; removes the directory too when this run created it and wrote
  // nothing there (a run refused before its first checkpoint leaves no trace).
  ~CheckpointDirLock();
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

 private:
  void release() noexcept;

  std::filesystem::path dir_;
  int fd_ = -1;           // the lock file's descriptor (rank 0), holding the lock
  bool created_ = false;  // rank 0 created dir_
};

}  // namespace tessera
