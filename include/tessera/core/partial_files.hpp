#pragma once
// defines: the outputs a run writes under a temporary name, and their cleanup should the process be killed:
// register_partial_file / unregister_partial_file for one file, StagedDir for a directory that is written
// whole and then renamed into place. When the process gets SIGTERM, SIGINT or SIGHUP (mpirun ending the
// healthy ranks after MPI_Abort, a user's Ctrl-C, Slurm's time limit), a handler removes every registered
// file and staged directory (the files in it, one level deep, then the directory), says so on stderr, and
// lets the signal end the process as it would have. Up to 16 paths at a time; each up to 4095 bytes.
#include <filesystem>

namespace tessera {

void register_partial_file(const std::filesystem::path& path);
// Preemption (a scheduler's SIGTERM, Slurm's --signal=USR1@T): while enabled, the first SIGTERM or SIGUSR1 only
// sets stop_requested() and says so on stderr; the run checkpoints at its next step boundary and ends. A second
// one, or SIGINT/SIGHUP, acts as above. `note`, when given, is called in the handler to add a line about what
// the rank was doing (async-signal-safe; dist/watchdog.hpp names the collective in flight).
void catch_stop_signals(bool enabled, void (*note)(int fd) = nullptr);
bool stop_requested();

void unregister_partial_file(const std::filesystem::path& path);

// Removes every registered file and staged directory now, saying "tessera: <why>; removed the unfinished output
// ..." on stderr: for a process about to _Exit (the collective watchdog). Async-signal-safe.
void remove_partial_outputs(const char* why) noexcept;

// A directory written under "<target>.partial-<pid>", beside `target` (taken as normalized_path gives it, so
// "out/" stages "out.partial-<pid>"), then moved into place by commit(). Until then it is removed by the
// destructor (an error on the way) and by the signal handler (a killed process); the target never shows a
// half-written directory. Throws Error naming the target when the directory cannot be created or moved.
class StagedDir {
 public:
  explicit StagedDir(const std::filesystem::path& target);
  StagedDir(StagedDir&& other) noexcept;  // the moved-from object no longer owns the directory
  StagedDir& operator=(StagedDir&&) = delete;
  ~StagedDir();

  const std::filesystem::path& path() const { return staged_; }    // write the contents here
  const std::filesystem::path& target() const { return target_; }  // where commit() puts them
  // Renames the staged directory to the target, which must be absent or an empty directory.
  void commit();

 private:
  std::filesystem::path target_, staged_;
  bool committed_ = false;
};

}  // namespace tessera
