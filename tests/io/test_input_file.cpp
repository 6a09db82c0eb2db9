// tests: io/input_file.hpp: a regular file reads as from an ifstream; a directory, FIFO or device is refused at once,
// naming what it is (once: a FIFO named labels.jsonl hung the run in open()).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support.hpp"
#include "tessera/io/input_file.hpp"

using tessera::io::InputFile;
namespace fs = std::filesystem;

TEST_CASE("InputFile reads a regular file and refuses FIFOs, devices and directories without blocking", "[io]") {
  const fs::path dir = tessera::testing::fresh_dir("input_file");
  std::ofstream(dir / "rows.jsonl") << "{\"a\": 1}\nsecond\n";
  {
    InputFile in(dir / "rows.jsonl");
    REQUIRE(in.is_open());
    CHECK(in.size() == 16);
    std::string line;
    REQUIRE(std::getline(in, line));
    CHECK(line == "{\"a\": 1}");
    REQUIRE(std::getline(in, line));
    CHECK(line == "second");
    CHECK_FALSE(std::getline(in, line));
  }
  REQUIRE(::mkfifo((dir / "labels.jsonl").c_str(), 0644) == 0);  // no writer: an open without O_NONBLOCK would block
  const auto refused = [](const fs::path& path) {
    InputFile in(path);
    CHECK_FALSE(in.is_open());
    CHECK_FALSE(in);  // a failed stream: reading it gives nothing
    return in.problem();
  };
  CHECK(refused(dir / "labels.jsonl") == "is a FIFO, not a regular file");
  CHECK(refused("/dev/null") == "is a character device, not a regular file");
  CHECK(refused(dir) == "is a directory, not a file");
  CHECK(refused(dir / "absent.jsonl") == "no such file");
  fs::remove_all(dir);
}
