// tests: engine/checkpoint_dir_lock.hpp: one run at a time in a checkpoint_dir (a second is refused naming the
// holder), the directory created and proven writable, and nothing left behind by a run that wrote nothing there.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/engine/checkpoint_dir_lock.hpp"
#include "scratch_dir.hpp"

using namespace tessera;
using testing::Cleanup;
using testing::fresh_dir;
namespace fs = std::filesystem;

namespace {

const c10::Device kCpu(c10::kCPU);

}  // namespace

TEST_CASE("CheckpointDirLock: a second holder is refused, naming the first, and the lock ends with its holder",
          "[engine][train_state]") {
  const fs::path tmp = fresh_dir("dir-lock");
  const Cleanup cleanup{tmp};
  const fs::path dir = tmp / "c";
  std::optional<CheckpointDirLock> first(std::in_place, dir, dist::AnyCommunicator(), kCpu);
  CHECK(fs::is_directory(dir));
  std::ifstream holder(dir / ".tessera-lock");
  std::string who;
  std::getline(holder, who);
  CHECK(who.rfind("pid " + std::to_string(::getpid()) + " on host ", 0) == 0);
  // flock conflicts between two opens of the file even in one process: this stands for a second run.
  CHECK_THROWS_AS(CheckpointDirLock(dir, dist::AnyCommunicator(), kCpu), ConfigError);
  CHECK_THROWS_WITH(CheckpointDirLock(dir, dist::AnyCommunicator(), kCpu),
                    "checkpoint_dir=" + dir.string() + ": another run is using this directory (" + who + " holds " +
                        (dir / ".tessera-lock").string() +
                        "); two runs writing one checkpoint_dir delete each other's checkpoints. Wait for that run to "
                        "end, or give this one another checkpoint_dir");
  std::ofstream(dir / "kept") << "a checkpoint";
  first.reset();
  CHECK(!fs::exists(dir / ".tessera-lock"));
  CHECK(fs::exists(dir / "kept"));  // the directory holds what the run wrote: it stays
  { const CheckpointDirLock second(dir, dist::AnyCommunicator(), kCpu); }
  // A lock file a killed run left (no process holds it) is taken over.
  std::ofstream(dir / ".tessera-lock") << "pid 1 on host gone\n";
  { const CheckpointDirLock third(dir, dist::AnyCommunicator(), kCpu); }
  CHECK(!fs::exists(dir / ".tessera-lock"));
}

TEST_CASE("CheckpointDirLock: a directory it created and nothing was written to is removed again",
          "[engine][train_state]") {
  const fs::path tmp = fresh_dir("dir-lock");
  const Cleanup cleanup{tmp};
  { const CheckpointDirLock lock(tmp / "a/b", dist::AnyCommunicator(), kCpu); }
  CHECK(!fs::exists(tmp / "a/b"));
  fs::create_directories(tmp / "existing");
  { const CheckpointDirLock lock(tmp / "existing", dist::AnyCommunicator(), kCpu); }
  CHECK(fs::is_directory(tmp / "existing"));  // not its to remove
  CHECK(fs::is_empty(tmp / "existing"));      // no probe or lock file left
}

TEST_CASE("CheckpointDirLock: a directory it cannot reach or write is refused before any step",
          "[engine][train_state]") {
  const fs::path tmp = fresh_dir("dir-lock");
  const Cleanup cleanup{tmp};
  fs::create_symlink("loop", tmp / "loop");
  CHECK_THROWS_AS(CheckpointDirLock(tmp / "loop", dist::AnyCommunicator(), kCpu), ConfigError);
  CHECK_THROWS_WITH(CheckpointDirLock(tmp / "loop", dist::AnyCommunicator(), kCpu),
                    Catch::Contains("checkpoint_dir=" + (tmp / "loop").string() + ": cannot reach the directory (") &&
                        Catch::Contains("symbolic links"));
  std::ofstream(tmp / "file") << "x";
  CHECK_THROWS_WITH(CheckpointDirLock(tmp / "file", dist::AnyCommunicator(), kCpu),
                    Catch::Contains("exists and is not a directory"));
  if (::geteuid() != 0) {  // root writes through permissions (the CLI test covers root, with a read-only mount)
    fs::create_directories(tmp / "ro");
    fs::permissions(tmp / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_WITH(CheckpointDirLock(tmp / "ro", dist::AnyCommunicator(), kCpu),
                      Catch::Contains("rank 0 cannot create a file there (") &&
                          Catch::Contains("give a directory this run can write in"));
    fs::permissions(tmp / "ro", fs::perms::owner_all);
  }
}
