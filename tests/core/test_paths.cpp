// tests: core/paths.hpp: one spelling per output path, and containment.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "tessera/core/paths.hpp"

using namespace tessera;
namespace fs = std::filesystem;

TEST_CASE("normalized_path drops trailing separators and dot steps", "[core]") {
  CHECK(normalized_path("out/") == fs::path("out"));
  CHECK(normalized_path("out///") == fs::path("out"));
  CHECK(normalized_path("./out/.") == fs::path("out"));
  CHECK(normalized_path("a/b/../c/") == fs::path("a/c"));
  CHECK(normalized_path("/tmp/x/") == fs::path("/tmp/x"));
  CHECK(normalized_path("/") == fs::path("/"));
  CHECK(normalized_path(".") == fs::path("."));
  CHECK(normalized_path("") == fs::path("."));
}

TEST_CASE("is_within compares whole components of resolved paths", "[core]") {
  const fs::path dir = fs::temp_directory_path() / ("tessera-paths-" + std::to_string(::getpid()));
  fs::create_directories(dir / "model");
  fs::create_directory_symlink(dir / "model", dir / "link");
  CHECK(is_within(dir / "model/config.json", dir / "model"));
  CHECK(is_within(dir / "model/", dir / "model"));
  CHECK(is_within(dir / "link/new.jsonl", dir / "model"));  // through a symbolic link
  CHECK_FALSE(is_within(dir / "model2/x", dir / "model"));  // a prefix of the name is not containment
  CHECK_FALSE(is_within(dir / "x", dir / "model"));
  CHECK(resolved_path(dir / "link/") == resolved_path(dir / "model"));
  fs::remove_all(dir);
}

TEST_CASE("resolved_path gives one path for every spelling of a file not yet written", "[core]") {
  // Relative names none of whose steps exists: "x.jsonl" once stayed relative while "./x.jsonl" resolved through
  // ".", so metrics=x.jsonl trace=./x.jsonl (and metrics=out save_dir=./out) passed as different files.
  const fs::path dir = fs::temp_directory_path() / ("tessera-paths-new-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  CHECK(resolved_path("x.jsonl") == resolved_path("./x.jsonl"));
  CHECK(resolved_path("x.jsonl") == fs::canonical(dir) / "x.jsonl");
  CHECK(resolved_path("out") == resolved_path("./out/"));
  CHECK(is_within("./out", "out"));
  CHECK(resolved_path("a/b/../c") == fs::canonical(dir) / "a/c");
  fs::current_path(cwd);
  fs::remove_all(dir);
}
