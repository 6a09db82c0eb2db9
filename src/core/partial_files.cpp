// implements: core/partial_files.hpp. The handler only calls async-signal-safe functions (unlink, signal,
// raise) on a fixed table.
#include "tessera/core/partial_files.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

namespace tessera {
namespace {

constexpr int kSlots = 16;
constexpr std::size_t kPathMax = 4096;
char slots[kSlots][kPathMax];
std::atomic<bool> used[kSlots];
std::mutex table_mutex;
std::once_flag handlers_installed;

void remove_partials(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (used[i].load()) ::unlink(slots[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void register_partial_file(const std::filesystem::path& path) {
  const std::string s = std::filesystem::absolute(path).string();
  if (s.size() >= kPathMax) return;
  std::call_once(handlers_installed, [] {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) std::signal(sig, remove_partials);
  });
  std::lock_guard lock(table_mutex);
  for (int i = 0; i < kSlots; ++i)
    if (!used[i].load()) {
      std::memcpy(slots[i], s.c_str(), s.size() + 1);
      used[i].store(true);
      return;
    }
}

void unregister_partial_file(const std::filesystem::path& path) {
  const std::string s = std::filesystem::absolute(path).string();
  std::lock_guard lock(table_mutex);
  for (int i = 0; i < kSlots; ++i)
    if (used[i].load() && s == slots[i]) {
      used[i].store(false);
      return;
    }
}

}  // namespace tessera
