// implements: core/new_file.hpp.
#include "tessera/core/new_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/core/partial_files.hpp"

namespace tessera {

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string replace_problem(const std::filesystem::path& target) {
  struct stat status {};
  if (::stat(target.c_str(), &status) != 0 || S_ISREG(status.st_mode)) return "";
  if (S_ISDIR(status.st_mode)) return "is a directory";
  return "is " + file_kind(status.st_mode) + ", not a regular file";
}

PartialFile create_partial_file(const std::filesystem::path& target) {
  const std::string base = target.string() + ".partial-" + std::to_string(::getpid());
  // Another writer of this process, or a name planted there: the next suffix. A bound, so that a directory that
  // refuses every name ends the loop.
  constexpr int kTries = 1000;
  int error = 0;
  for (int k = 0; k < kTries; ++k) {
    PartialFile file{k == 0 ? base : base + "-" + std::to_string(k)};
    register_partial_file(file.path);  // before it exists: a signal in between finds nothing to remove
    file.fd = ::open(file.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (file.fd >= 0) return file;
    error = errno;
    unregister_partial_file(file.path);
    if (error != EEXIST) break;
  }
  throw Error("cannot create the temporary file " + base + ": " + std::strerror(error) +
              (error == EEXIST ? " (" + std::to_string(kTries) + " names tried)" : std::string()));
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool open_stream(std::ofstream& out, PartialFile& file) {
  // /proc/self/fd/N opens the file the descriptor holds, whatever its name has become since.
  out.open("/proc/self/fd/" + std::to_string(file.fd), std::ios::out | std::ios::binary);
  if (!out) {
    out.clear();
    out.open(file.path, std::ios::in | std::ios::out | std::ios::binary);  // neither O_CREAT nor O_TRUNC
  }
  ::close(file.fd);
  file.fd = -1;
  return static_cast<bool>(out);
}

}  // namespace tessera
