#pragma once
// Shared by the fuzz targets (tests/fuzz/README.md): each input is written to a file in a private directory and
// handed to the reader under test. The oracle: the reader returns, or throws tessera::Error (FormatError,
// ConfigError) with its message; anything else (a crash, a sanitizer report, any other exception escaping, an
// allocation past libFuzzer's -malloc_limit_mb, a hang) is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace tessera::fuzz {

// A directory of this process's own, made once (in /dev/shm when it exists: no disk writes per input).
inline const std::filesystem::path& work_dir() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("tessera-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static const std::filesystem::path removed_at_exit = d;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(removed_at_exit, ignored);
    });
    return d;
  }();
  return dir;
}

inline std::filesystem::path write_file(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

inline std::filesystem::path write_file(const std::filesystem::path& path, std::string_view text) {
  return write_file(path, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

}  // namespace tessera::fuzz
