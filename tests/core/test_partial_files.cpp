// tests: core/partial_files.hpp: StagedDir stages beside its target and commits whole; a killed process
// leaves neither a staged directory nor a partial file behind.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/partial_files.hpp"

using namespace tessera;
using Catch::Contains;
namespace fs = std::filesystem;

TEST_CASE("StagedDir writes beside the target, also when the target is spelled with a trailing slash", "[core]") {
  const fs::path dir = tessera::testing::fresh_dir("partial");
  {
    StagedDir staged((dir / "out/").string());
    CHECK(staged.target() == dir / "out");
    CHECK(staged.path() == fs::path((dir / "out").string() + ".partial-" + std::to_string(::getpid())));
    CHECK(fs::is_directory(staged.path()));
    std::ofstream(staged.path() / "config.json") << "{}";
    staged.commit();
  }
  CHECK(fs::is_regular_file(dir / "out/config.json"));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);  // nothing but out/

  fs::create_directory(dir / "empty");  // an empty directory may be replaced
  StagedDir into_empty(dir / "empty///");
  into_empty.commit();
  CHECK(fs::is_empty(dir / "empty"));

  StagedDir onto_full(dir / "out");
  CHECK_THROWS_WITH(onto_full.commit(), Contains("out: cannot move the written directory") &&
                                            Contains("must be absent or an empty directory"));
  fs::remove_all(dir);
}

TEST_CASE("an uncommitted StagedDir is removed, the root and dot names are refused", "[core]") {
  const fs::path dir = tessera::testing::fresh_dir("partial");
  fs::path staged_path;
  {
    StagedDir staged(dir / "out");
    staged_path = staged.path();
    std::ofstream(staged.path() / "model.safetensors") << "partial";
  }
  CHECK_FALSE(fs::exists(staged_path));
  CHECK_FALSE(fs::exists(dir / "out"));
  CHECK_THROWS_WITH(StagedDir("/"), Contains("names the root, the working directory or its parent"));
  CHECK_THROWS_WITH(StagedDir("."), Contains("names the root"));
  CHECK_THROWS_WITH(StagedDir(dir / ".."), Contains("names the root"));
  fs::remove_all(dir);
}

TEST_CASE("a StagedDir removes what an ended process left staged for the same target", "[core]") {
  const fs::path dir = tessera::testing::fresh_dir("partial_stale");
  const pid_t child = ::fork();  // a pid no process has: a child that has ended and been reaped
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const fs::path stale = dir / ("out.partial-" + std::to_string(child));
  const fs::path live = dir / ("out.partial-" + std::to_string(::getppid()));
  fs::create_directories(stale);
  fs::create_directories(live);
  std::ofstream(stale / "model.safetensors") << "half a save, killed outright";
  {
    StagedDir staged(dir / "out");
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(live));  // another live process's
    CHECK(fs::exists(staged.path()));
  }
  fs::remove_all(dir);
}

TEST_CASE("SIGTERM removes staged directories and partial files, then ends the process by that signal", "[core]") {
  const fs::path dir = tessera::testing::fresh_dir("partial");
  const fs::path partial = dir / "metrics.jsonl.partial";
  const int status = tessera::testing::status_of_child([&] {
    std::ofstream(partial) << "{}\n";
    register_partial_file(partial);
    StagedDir staged(dir / "out");
    for (int i = 0; i < 40; ++i) std::ofstream(staged.path() / ("shard-" + std::to_string(i))) << "bytes";
    std::ofstream(staged.path() / "model.safetensors.partial-1") << "half a file";
    std::raise(SIGTERM);
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(fs::is_empty(dir));  // no out.partial-<pid>, no metrics partial file
  fs::remove_all(dir);
}
