// tests: core/new_file.hpp: the temporary file of an output is created new, beside the target, never through a file
// or symbolic link already there; outputs that are devices, FIFOs, sockets or directories are named; two paths are
// one file by device and inode.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/new_file.hpp"
#include "tessera/core/partial_files.hpp"

using namespace tessera;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("create_partial_file never opens a link planted under its name", "[core]") {
  const fs::path dir = tessera::testing::fresh_dir("new_file");
  std::ofstream(dir / "train.bin") << "the data";
  const std::string pid = std::to_string(::getpid());
  // Once "ln -s train.bin m.jsonl.partial" made a run's metrics overwrite its data; here the names this process
  // would take first are links to the data, dangling ones among them.
  fs::create_symlink(dir / "train.bin", dir / ("m.jsonl.partial-" + pid));
  fs::create_symlink(dir / "nowhere", dir / ("m.jsonl.partial-" + pid + "-1"));
  PartialFile file = create_partial_file(dir / "m.jsonl");
  CHECK(file.path == fs::path((dir / "m.jsonl").string() + ".partial-" + pid + "-2"));
  REQUIRE(file.fd >= 0);
  CHECK(write_all(file.fd, "{}\n"));
  ::close(file.fd);
  CHECK(fs::is_regular_file(fs::symlink_status(file.path)));
  CHECK(contents(file.path) == "{}\n");
  CHECK(contents(dir / "train.bin") == "the data");
  CHECK_FALSE(fs::exists(dir / "nowhere"));
  // Through an ofstream: the file itself, whatever its name.
  PartialFile second = create_partial_file(dir / "t.json");
  std::ofstream out;
  REQUIRE(open_stream(out, second));
  CHECK(second.fd == -1);
  out << "trace";
  out.close();
  CHECK(contents(second.path) == "trace");
  unregister_partial_file(file.path);
  unregister_partial_file(second.path);
  CHECK_THROWS_WITH(create_partial_file(dir / "missing" / "x.json"),
                    Contains("cannot create the temporary file " + (dir / "missing" / "x.json").string() +
                             ".partial-" + pid + ": No such file or directory"));
  fs::remove_all(dir);
}

TEST_CASE("create_partial_file removes what an ended process left unfinished, and nothing else", "[core]") {
  const fs::path dir = tessera::testing::fresh_dir("new_file_stale");
  // A pid no process has: a child that has ended and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const std::string dead = std::to_string(child), alive = std::to_string(::getppid());
  std::ofstream(dir / "data.bin") << "the data";
  for (const std::string& name : {"m.jsonl.partial-" + dead, "m.jsonl.partial-" + dead + "-3"})
    std::ofstream(dir / name) << "{\"event\":\"run\"}\n";  // a run killed outright (SIGKILL) left these
  std::ofstream(dir / ("m.jsonl.partial-" + alive)) << "another live process's";
  std::ofstream(dir / ("mx.jsonl.partial-" + dead)) << "another output's";
  std::ofstream(dir / "m.jsonl.partial-x1") << "not a pid";
  fs::create_symlink(dir / "data.bin", dir / ("m.jsonl.partial-" + dead + "-4"));  // a link: never followed, kept
  PartialFile file = create_partial_file(dir / "m.jsonl");
  ::close(file.fd);
  unregister_partial_file(file.path);
  CHECK_FALSE(fs::exists(dir / ("m.jsonl.partial-" + dead)));
  CHECK_FALSE(fs::exists(dir / ("m.jsonl.partial-" + dead + "-3")));
  CHECK(fs::exists(dir / ("m.jsonl.partial-" + alive)));
  CHECK(fs::exists(dir / ("mx.jsonl.partial-" + dead)));
  CHECK(fs::exists(dir / "m.jsonl.partial-x1"));
  CHECK(fs::is_symlink(dir / ("m.jsonl.partial-" + dead + "-4")));
  CHECK(contents(dir / "data.bin") == "the data");
  CHECK(fs::exists(file.path));
  fs::remove_all(dir);
}

TEST_CASE("replace_problem names what an output must not replace, same_file compares device and inode", "[core]") {
  const fs::path dir = tessera::testing::fresh_dir("new_file");
  std::ofstream(dir / "a.jsonl") << "a";
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  fs::create_symlink(dir / "a.jsonl", dir / "link.jsonl");
  CHECK(replace_problem(dir / "a.jsonl").empty());
  CHECK(replace_problem(dir / "absent.jsonl").empty());
  CHECK(replace_problem(dir / "link.jsonl").empty());  // a link to a regular file
  CHECK(replace_problem(dir) == "is a directory");
  CHECK(replace_problem(dir / "fifo") == "is a FIFO, not a regular file");
  CHECK(replace_problem("/dev/null") == "is a character device, not a regular file");
  fs::create_hard_link(dir / "a.jsonl", dir / "hard.jsonl");
  CHECK(same_file(dir / "a.jsonl", dir / "hard.jsonl"));
  CHECK(same_file(dir / "a.jsonl", dir / "link.jsonl"));
  CHECK(same_file(dir / "a.jsonl", dir / "." / "a.jsonl"));
  CHECK_FALSE(same_file(dir / "a.jsonl", dir / "fifo"));
  CHECK_FALSE(same_file(dir / "absent.jsonl", dir / "absent.jsonl"));  // nothing there: not one file
  fs::remove_all(dir);
}
