#pragma once
// Scratch directories for the test files (light: no tessera header, so the sanitized tests may include it too).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace tessera::testing {

// Removes `dir` and what it holds when the process exits normally (a test that fails a REQUIRE included), so a run of
// the suite leaves nothing under the temp dir.
inline void remove_at_exit(const std::filesystem::path& dir) {
  static struct Registry {
    std::vector<std::filesystem::path> dirs;
    pid_t owner = ::getpid();  // a forked child that exits leaves its parent's directories alone
    ~Registry() {
      if (::getpid() != owner) return;
      std::error_code ignored;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ignored);
    }
  } registry;
  if (std::find(registry.dirs.begin(), registry.dirs.end(), dir) == registry.dirs.end()) registry.dirs.push_back(dir);
}

// An empty directory under the system temp dir, unique to this process and `tag`, removed at exit at the latest.
inline std::filesystem::path fresh_dir(std::string_view tag) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera-" + std::string(tag) + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  remove_at_exit(dir);
  return dir;
}

// Removes a directory (fresh_dir's) when the test leaves its scope, whether it passed or not.
struct Cleanup {
  std::filesystem::path dir;
  ~Cleanup() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

}  // namespace tessera::testing
