// implements: core/new_file.hpp.
#include "tessera/core/new_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

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

namespace {

// The pid in "<name>.partial-<pid>" or "<name>.partial-<pid>-<k>", or 0 when `entry` is not such a name.
pid_t partial_owner(std::string_view entry, std::string_view name) {
  constexpr std::string_view infix = ".partial-";
  if (!entry.starts_with(name) || !entry.substr(name.size()).starts_with(infix)) return 0;
  std::string_view rest = entry.substr(name.size() + infix.size());
  const std::size_t dash = rest.find('-');
  const std::string_view digits = rest.substr(0, dash);
  const std::string_view k = dash == std::string_view::npos ? std::string_view("0") : rest.substr(dash + 1);
  const auto all_digits = [](std::string_view t) {
    return !t.empty() && t.size() <= 9 && t.find_first_not_of("0123456789") == std::string_view::npos;
  };
  return all_digits(digits) && all_digits(k) ? static_cast<pid_t>(std::stol(std::string(digits))) : 0;
}

}  // namespace

std::vector<std::filesystem::path> remove_stale_partial_files(const std::filesystem::path& target) {
  namespace fs = std::filesystem;
  std::vector<fs::path> removed;
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string name = target.filename().string();
  if (name.empty()) return removed;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    const pid_t pid = partial_owner(entry, name);
    if (pid <= 0 || pid == ::getpid()) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) ||
        st.st_uid != ::geteuid())
      continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer lives (or is another user's)
    std::error_code gone;
    if (S_ISDIR(st.st_mode) ? (fs::remove_all(it->path(), gone), !gone) : ::unlink(it->path().c_str()) == 0) {
      removed.push_back(target.has_parent_path() ? it->path() : fs::path(entry));
      std::fprintf(stderr, "tessera: removed %s, left unfinished by a process that has ended\n",
                   removed.back().c_str());
    }
  }
  return removed;
}

PartialFile create_partial_file(const std::filesystem::path& target) {
  remove_stale_partial_files(target);
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
