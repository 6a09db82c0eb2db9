#pragma once
// Scratch directories for the test files (light: no tessera header, so the sanitized tests may include it too).
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace tessera::testing {

// An empty directory under the system temp dir, unique to this process and `tag`; the test removes it.
inline std::filesystem::path fresh_dir(std::string_view tag) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera-" + std::string(tag) + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
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
