// implements: core/partial_files.hpp. The handler only calls async-signal-safe functions (open, getdents64,
// unlinkat, rmdir, unlink, write, signal, raise) on a fixed table.
#include "tessera/core/partial_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/core/new_file.hpp"
#include "tessera/core/paths.hpp"

namespace tessera {
namespace {

constexpr int kSlots = 16;
constexpr std::size_t kPathMax = 4096;
char slots[kSlots][kPathMax];
bool slot_is_dir[kSlots];
std::atomic<bool> used[kSlots];
std::mutex table_mutex;
std::mutex install_mutex;

void say(const char* text) {
  for (std::size_t left = std::strlen(text); left > 0;) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

// A staged directory holds plain files only (weights, config, an index, their .tmp files): unlink them all,
// re-reading from the start until none is left (unlinking while reading may skip entries), then the dir.
void remove_flat_dir(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buffer[4096];
    for (int pass = 0; pass < 64; ++pass) {
      ::lseek(fd, 0, SEEK_SET);
      bool removed = false;
      for (ssize_t n; (n = ::getdents64(fd, buffer, sizeof buffer)) > 0;) {
        for (ssize_t offset = 0; offset < n;) {
          const auto* entry = reinterpret_cast<const struct dirent64*>(buffer + offset);
          const char* name = entry->d_name;
          if (std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0 && ::unlinkat(fd, name, 0) == 0)
            removed = true;
          offset += entry->d_reclen;
        }
      }
      if (!removed) break;
    }
    ::close(fd);
  }
  ::rmdir(path);
}

std::atomic<bool> stop_enabled{false};
std::atomic<int> stop_signal{0};
std::atomic<void (*)(int)> stop_note{nullptr};

void remove_registered(const char* why) {
  bool any = false;
  for (int i = 0; i < kSlots; ++i) {
    if (!used[i].load()) continue;
    if (slot_is_dir[i]) remove_flat_dir(slots[i]);
    else ::unlink(slots[i]);
    if (!any) {
      say("tessera: ");
      say(why);
      say("; removed the unfinished output");
    }
    say(any ? ", " : " ");
    say(slots[i]);
    any = true;
  }
  if (any) say("\n");
}

void remove_partials(int sig) {
  if (void (*note)(int) = stop_note.load(); note != nullptr) note(STDERR_FILENO);
  remove_registered("stopped by a signal");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// The first SIGTERM/SIGUSR1 while stopping is enabled asks for a stop; anything else ends the process.
void on_signal(int sig) {
  if ((sig == SIGTERM || sig == SIGUSR1) && stop_enabled.load()) {
    int none = 0;
    if (stop_signal.compare_exchange_strong(none, sig)) {
      say(sig == SIGTERM ? "tessera: SIGTERM" : "tessera: SIGUSR1");
      say(": checkpointing at the end of this step, then stopping (send it again to stop at once)\n");
      if (void (*note)(int) = stop_note.load(); note != nullptr) note(STDERR_FILENO);
      return;
    }
  }
  if (sig == SIGUSR1 && !stop_enabled.load()) {  // its default action, as if never caught
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  remove_partials(sig);
}

// Installed again whenever another handler has taken a signal's place since (a test framework that restores its own
// at the end of each test, a library's), not only once per process.
void install_handlers() {
  const std::lock_guard lock(install_mutex);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) {
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler != on_signal) std::signal(sig, on_signal);
  }
}

void add(const std::filesystem::path& path, bool is_dir) {
  const std::string s = std::filesystem::absolute(path).string();
  if (s.size() >= kPathMax) return;
  install_handlers();
  std::lock_guard lock(table_mutex);
  for (int i = 0; i < kSlots; ++i)
    if (!used[i].load()) {
      std::memcpy(slots[i], s.c_str(), s.size() + 1);
      slot_is_dir[i] = is_dir;
      used[i].store(true);
      return;
    }
}

void remove_entry(const std::filesystem::path& path) {
  const std::string s = std::filesystem::absolute(path).string();
  std::lock_guard lock(table_mutex);
  for (int i = 0; i < kSlots; ++i)
    if (used[i].load() && s == slots[i]) {
      used[i].store(false);
      return;
    }
}

}  // namespace

void register_partial_file(const std::filesystem::path& path) { add(path, false); }

void catch_stop_signals(bool enabled, void (*note)(int fd)) {
  stop_note.store(note);
  stop_enabled.store(enabled);
  if (!enabled) stop_signal.store(0);
  install_handlers();
}

bool stop_requested() { return stop_signal.load() != 0; }

void unregister_partial_file(const std::filesystem::path& path) { remove_entry(path); }

void remove_partial_outputs(const char* why) noexcept { remove_registered(why); }

StagedDir::StagedDir(const std::filesystem::path& target) : target_(normalized_path(target)) {
  // The name as given too: "/data/run/.." normalizes to "/data", which must not be replaced either.
  std::filesystem::path given = target;
  while (!given.has_filename() && given.has_relative_path()) given = given.parent_path();  // "out/" -> "out"
  const std::string name = target_.filename().string(), given_name = given.filename().string();
  if (target_ == target_.root_path() || name == "." || name == ".." || given_name == "." || given_name == "..")
    throw Error(target.string() + ": names the root, the working directory or its parent; give a new directory "
                "name, e.g. out");
  remove_stale_partial_files(target_);  // what a process killed outright left of this target
  staged_ = target_;
  staged_ += ".partial-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(staged_, ec);  // a leftover of a process with our pid that died unregistered
  add(staged_, true);                        // before creating it: a signal in between finds nothing to remove
  if (!std::filesystem::create_directory(staged_, ec) || ec) {
    remove_entry(staged_);
    throw Error(target_.string() + ": cannot create the temporary directory " + staged_.string() + ": " +
                (ec ? ec.message() : std::string("it already exists")));
  }
}

StagedDir::StagedDir(StagedDir&& other) noexcept
    : target_(std::move(other.target_)), staged_(std::move(other.staged_)),
      committed_(std::exchange(other.committed_, true)) {}

StagedDir::~StagedDir() {
  if (committed_) return;
  std::error_code ignored;
  std::filesystem::remove_all(staged_, ignored);
  remove_entry(staged_);
}

void StagedDir::commit() {
  std::error_code ec;
  if (std::filesystem::is_directory(target_, ec)) std::filesystem::remove(target_, ec);  // fails unless empty
  ec.clear();
  std::filesystem::rename(staged_, target_, ec);
  if (ec)
    throw Error(target_.string() + ": cannot move the written directory " + staged_.string() + " into place: " +
                ec.message() + " (the target must be absent or an empty directory)");
  remove_entry(staged_);
  committed_ = true;
}

}  // namespace tessera
