// implements: engine/checkpoint_dir_lock.hpp.
#include "tessera/engine/checkpoint_dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/engine/train_state.hpp"

namespace tessera {
namespace fs = std::filesystem;

namespace {

constexpr const char* kLockFile = ".tessera-lock";

std::string system_reason(int error) { return std::strerror(error); }

// Creates and removes DIR/.tessera-probe-<rank>-<pid> with one byte in it; the reason when that fails.
std::optional<std::string> probe(const fs::path& dir, int rank) {
  const fs::path file = dir / (".tessera-probe-" + std::to_string(rank) + "-" + std::to_string(::getpid()));
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return "rank " + std::to_string(rank) + " cannot create a file there (" + file.string() + ": " +
           system_reason(errno) + ")";
  const bool wrote = ::write(fd, "x", 1) == 1;
  const int write_error = errno;
  ::close(fd);
  const bool removed = ::unlink(file.c_str()) == 0;
  const int remove_error = errno;
  if (!wrote)
    return "rank " + std::to_string(rank) + " cannot write a file there (" + file.string() + ": " +
           system_reason(write_error) + ")";
  if (!removed)
    return "rank " + std::to_string(rank) + " cannot remove a file there (" + file.string() + ": " +
           system_reason(remove_error) + "), as keep_last must";
  return std::nullopt;
}

// What the holder wrote in the lock file ("pid 123 on host a"), or a phrase for an empty one.
std::string holder_of(int fd) {
  char text[200] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder.empty() ? std::string("a process that did not say who it is") : holder;
}

// Locks `path` (created if absent) and writes who holds it: the locked descriptor in `fd`, or the reason it could
// not. fd stays -1 without a reason on a file system that cannot lock (said on stderr).
std::optional<std::string> lock(const fs::path& path, int& fd) {
  // The previous holder removes the file as it ends, so the file opened may be gone from the directory by the time
  // it is locked: lock the file the path names (the inodes compared after locking), or try again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    // O_NOFOLLOW: a link planted at the lock file's name is refused, not written through.
    const int candidate = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (candidate < 0) return "cannot open its lock file " + path.string() + " (" + system_reason(errno) + ")";
    if (::flock(candidate, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      std::optional<std::string> why;
      if (error == EWOULDBLOCK)
        why = "another run is using this directory (" + holder_of(candidate) + " holds " + path.string() +
              "); two runs writing one checkpoint_dir delete each other's checkpoints. Wait for that run to end, "
              "or give this one another checkpoint_dir";
      else if (error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS)
        std::fprintf(stderr, "[checkpoint] %s: this file system does not lock files (%s); make sure no other run "
                     "uses this checkpoint_dir while this one runs\n", path.c_str(), system_reason(error).c_str());
      else
        why = "cannot lock " + path.string() + " (" + system_reason(error) + ")";
      ::close(candidate);
      if (!why) ::unlink(path.c_str());  // unlocked: leave nothing behind
      return why;
    }
    struct stat held {}, named {};
    if (::fstat(candidate, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "an unknown host");
      const std::string who = "pid " + std::to_string(::getpid()) + " on host " + host + "\n";
      fd = candidate;
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, who.data(), who.size(), 0) != static_cast<ssize_t>(who.size()))
        return "cannot write its lock file " + path.string() + " (" + system_reason(errno) + ")";
      return std::nullopt;
    }
    ::close(candidate);
  }
  return "its lock file " + path.string() + " was replaced 100 times while this run tried to lock it; is another "
         "program removing it?";
}

}  // namespace

CheckpointDirLock::CheckpointDirLock(const fs::path& dir, dist::AnyCommunicator world, c10::Device device)
    : dir_(dir) {
  const int rank = world.empty() ? 0 : world.rank();
  const std::string key = "checkpoint_dir=" + dir.string() + ": ";
  const auto agree = [&](const std::optional<std::string>& mine) {
    if (std::optional<std::string> failure = train_state::first_failure(world, device, mine))
      throw ConfigError(key + *failure);
  };
  try {
    std::optional<std::string> failure;
    if (rank == 0) {
      std::error_code ec;
      const fs::file_status status = fs::status(dir, ec);
      if (status.type() == fs::file_type::not_found) {
        created_ = fs::create_directories(dir, ec);
        if (ec) failure = "cannot create the directory (" + ec.message() + "); give one this run can create";
      } else if (ec) {
        failure = "cannot reach the directory (" + ec.message() + "); give one this run can write in";
      } else if (!fs::is_directory(status)) {
        failure = "exists and is not a directory; give a directory, e.g. checkpoint_dir=ckpt";
      }
    }
    agree(failure);

    failure = probe(dir, rank);
    if (failure)
      *failure += "; give a directory this run can write in (a read-only mount, an immutable directory or missing "
                  "permissions refuse it)";
    else if (rank == 0)
      failure = lock(dir / kLockFile, fd_);
    agree(failure);
  } catch (...) {
    release();
    throw;
  }
}

CheckpointDirLock::~CheckpointDirLock() { release(); }

void CheckpointDirLock::release() noexcept {
  if (fd_ >= 0) {
    ::unlink((dir_ / kLockFile).c_str());  // while still locked: a waiting run then locks a file of its own
    ::close(fd_);
    fd_ = -1;
  }
  if (created_) {
    std::error_code ec;
    fs::remove(dir_, ec);  // only succeeds when empty: nothing was checkpointed there
    created_ = false;
  }
}

}  // namespace tessera
