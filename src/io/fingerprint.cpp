// implements: io/fingerprint.hpp.
#include "tessera/io/fingerprint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "tessera/core/crc32c.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
constexpr std::int64_t kEdge = 64 << 10;
constexpr std::size_t kFilesRead = 16;  // a directory of a million images is listed, not read

struct Printed {
  std::int64_t bytes = 0;
  std::uint32_t crc = 0;
  std::string problem;  // empty: read
};

// A regular file's size and the CRC-32C of its first and last kEdge bytes (the whole file when it is smaller).
Printed of_file(const fs::path& path) {
  Printed p;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    p.problem = std::strerror(errno);
    return p;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    p.problem = "not a regular file";
    ::close(fd);
    return p;
  }
  p.bytes = static_cast<std::int64_t>(st.st_size);
  std::vector<char> buffer(static_cast<std::size_t>(kEdge));
  const auto crc_at = [&](std::int64_t offset, std::int64_t n) {
    std::int64_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, buffer.data() + got, static_cast<std::size_t>(n - got), offset + got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += r;
    }
    p.crc = crc32c(std::string_view(buffer.data(), static_cast<std::size_t>(got)), p.crc);
  };
  crc_at(0, std::min(p.bytes, kEdge));
  if (p.bytes > kEdge) crc_at(std::max(kEdge, p.bytes - kEdge), std::min(kEdge, p.bytes - kEdge));
  ::close(fd);
  return p;
}

bool left_out(const std::string& name) { return name.starts_with('.') || name.ends_with(".tokens"); }

}  // namespace

std::string fingerprint(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec) return "cannot be read: " + ec.message();
  if (fs::is_regular_file(status)) {
    const Printed p = of_file(path);
    if (!p.problem.empty()) return "cannot be read: " + p.problem;
    return std::to_string(p.bytes) + " bytes, CRC-32C " + crc32c_hex(p.crc) + " of its first and last 64 KiB";
  }
  if (!fs::is_directory(status)) return "neither a file nor a directory";
  std::vector<std::string> names;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    if (std::string name = it->path().filename().string(); !left_out(name)) names.push_back(std::move(name));
  if (ec) return "cannot be read: " + ec.message();
  std::sort(names.begin(), names.end());
  std::uint32_t crc = 0;
  std::size_t read = 0;  // files whose ends were read
  for (const std::string& name : names) {
    const fs::path entry = path / name;
    std::string line = name;
    if (fs::is_directory(entry, ec)) {
      std::int64_t n = 0;
      for (fs::directory_iterator it(entry, ec), end; !ec && it != end; it.increment(ec))
        n += !left_out(it->path().filename().string());
      line += "/ " + std::to_string(n);
    } else if (read < kFilesRead) {
      ++read;
      const Printed p = of_file(entry);
      line += " " + std::to_string(p.bytes) + " " + crc32c_hex(p.crc) + " " + p.problem;
    } else {
      line += " " + std::to_string(fs::file_size(entry, ec));
    }
    crc = crc32c(line + "\n", crc);
  }
  return std::to_string(names.size()) + " entries, CRC-32C " + crc32c_hex(crc) +
         " of their names and sizes and the ends of the first " + std::to_string(kFilesRead) + " files";
}

}  // namespace tessera::io
