// implements: dist/watchdog.hpp. The guard's state is a few atomics, so the thread and a signal handler read it
// without locks; note() formats with its own digits (snprintf is not async-signal-safe).
#include "tessera/dist/watchdog.hpp"

#include "tessera/core/partial_files.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

namespace tessera::dist::watchdog {
namespace {

std::atomic<std::int64_t> since_ns{0};  // when the outermost guard began; 0: no collective in flight
std::atomic<const char*> what_now{nullptr};
std::atomic<std::int64_t> bytes_now{0};
std::atomic<int> depth{0};
std::atomic<std::int64_t> step_now{-1};
std::atomic<int> rank_of{0}, size_of{1};

std::atomic<std::int64_t> timeout_now{0};  // 0: no limit

std::mutex mutex;
std::condition_variable wake;
std::thread thread;
bool running = false;
int starts = 0;  // start() calls not yet matched by stop()

std::int64_t now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// Async-signal-safe text building: a fixed buffer and hand-made digits.
struct Line {
  char text[512];
  std::size_t n = 0;
  void add(const char* s) {
    for (; *s != '\0' && n + 1 < sizeof text; ++s) text[n++] = *s;
  }
  void add(std::int64_t v) {
    char digits[24];
    int k = 0;
    const bool negative = v < 0;
    std::uint64_t u = negative ? static_cast<std::uint64_t>(-(v + 1)) + 1 : static_cast<std::uint64_t>(v);
    do digits[k++] = static_cast<char>('0' + u % 10); while ((u /= 10) != 0 && k < 23);
    if (negative) add("-");
    while (k > 0 && n + 1 < sizeof text) text[n++] = digits[--k];
  }
  void seconds(std::int64_t ns) {  // one decimal
    add(ns / 1'000'000'000);
    add(".");
    add((ns / 100'000'000) % 10);
  }
  void bytes(std::int64_t b) {
    if (b >= 1'000'000) { add(b / 1'000'000); add("."); add((b / 100'000) % 10); add(" MB"); }
    else if (b >= 1000) { add(b / 1000); add(" kB"); }
    else { add(b); add(" B"); }
  }
  void write(int fd) const {
    for (std::size_t off = 0; off < n;) {
      const ssize_t w = ::write(fd, text + off, n - off);
      if (w <= 0) return;
      off += static_cast<std::size_t>(w);
    }
  }
};

// "[rank r/W] <collective> of <bytes> in step s has waited x s"; false when none is in flight.
bool describe(Line& line, std::int64_t now) {
  const std::int64_t since = since_ns.load();
  const char* what = what_now.load();
  if (since == 0 || what == nullptr) return false;
  line.add("[rank ");
  line.add(rank_of.load());
  line.add("/");
  line.add(size_of.load());
  line.add("] ");
  line.add(what);
  if (const std::int64_t b = bytes_now.load(); b > 0) {
    line.add(" of ");
    line.bytes(b);
  }
  if (const std::int64_t s = step_now.load(); s >= 0) {
    line.add(" in step ");
    line.add(s + 1);  // steps are printed 1-based, as the step lines do
  }
  line.add(" had waited ");
  line.seconds(now - since);
  line.add(" s");
  return true;
}

void watch() {
  std::unique_lock lock(mutex);
  while (running) {
    wake.wait_for(lock, std::chrono::milliseconds(100));
    if (!running) return;
    const std::int64_t since = since_ns.load();
    const std::int64_t now = now_ns();
    const std::int64_t timeout_ns = timeout_now.load();
    if (since == 0 || timeout_ns == 0 || now - since <= timeout_ns) continue;
    Line line;
    line.add("collective watchdog: ");
    if (!describe(line, now)) continue;
    line.add(" (collective_timeout_s=");
    line.seconds(timeout_ns);
    line.add("): another rank of its group is stuck or gone; ending the job (raise collective_timeout_s if a step "
             "legitimately takes longer)\n");
    line.write(STDERR_FILENO);
    std::fflush(nullptr);
    remove_partial_outputs("ended by the collective watchdog");
    std::_Exit(124);
  }
}

}  // namespace

void start(double timeout_s, int rank, int size) {
  rank_of.store(rank);
  size_of.store(size);
  timeout_now.store(timeout_s > 0 ? static_cast<std::int64_t>(timeout_s * 1e9) : 0);
  std::lock_guard lock(mutex);
  ++starts;
  if (running || timeout_s <= 0 || size <= 1) return;
  running = true;
  thread = std::thread(watch);
}

void stop() {
  {
    std::lock_guard lock(mutex);
    if (starts > 0) --starts;
    if (starts > 0 || !running) return;
    running = false;
  }
  wake.notify_all();
  thread.join();
}

void set_step(std::int64_t step) { step_now.store(step); }

Guard::Guard(const char* what, std::int64_t bytes) {
  if (depth.fetch_add(1) == 0) {
    what_now.store(what);
    bytes_now.store(bytes);
    since_ns.store(now_ns());
  }
}

Guard::~Guard() {
  if (depth.fetch_sub(1) == 1) since_ns.store(0);
}

void note(int fd) {
  Line line;
  if (!describe(line, now_ns())) return;
  line.add(" when the signal came (when another rank has died, mpirun's message names it)\n");
  line.write(fd);
}

}  // namespace tessera::dist::watchdog
