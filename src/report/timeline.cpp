// implements: report/timeline.hpp.
#include "tessera/report/timeline.hpp"

#include <unistd.h>

#ifdef TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/core/new_file.hpp"
#include "tessera/core/partial_files.hpp"

namespace tessera::timeline {
namespace {

using Clock = std::chrono::steady_clock;

// Events kept per rank (40 bytes each: 40 MB); a longer run keeps its first ones and says so once. Perfetto
// struggles well before this; trace a few steps (max_steps=) rather than a whole run.
constexpr std::size_t max_events = 1'000'000;

struct Recorder {
  bool on = false;
  bool cuda = false;
  bool warned = false;
  Clock::time_point origin{};
  std::vector<Event> events;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

std::int64_t since_origin(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - recorder().origin).count();
}

void sync_device() {
#ifdef TESSERA_WITH_CUDA
  if (recorder().cuda) static_cast<void>(cudaDeviceSynchronize());
#endif
}

Kind collective_kind(dist::CollectiveKind k) {
  switch (k) {
    case dist::CollectiveKind::all_reduce: return Kind::all_reduce;
    case dist::CollectiveKind::all_gather: return Kind::all_gather;
    case dist::CollectiveKind::reduce_scatter: return Kind::reduce_scatter;
    case dist::CollectiveKind::broadcast: return Kind::broadcast;
    case dist::CollectiveKind::barrier: return Kind::barrier;
  }
  return Kind::barrier;
}

// "12.5 MiB", "512 B": the bytes of a collective or copy, as the event's name shows them.
std::string bytes_text(std::int64_t bytes) {
  constexpr std::array<const char*, 4> units{"B", "KiB", "MiB", "GiB"};
  double v = static_cast<double>(bytes);
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < units.size()) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::step: return "step";
    case Kind::micro_step: return "micro-step";
    case Kind::forward: return "forward";
    case Kind::backward: return "backward";
    case Kind::optimizer: return "optimizer step";
    case Kind::all_reduce: return "all-reduce";
    case Kind::all_gather: return "all-gather";
    case Kind::reduce_scatter: return "reduce-scatter";
    case Kind::broadcast: return "broadcast";
    case Kind::barrier: return "barrier";
    case Kind::h2d: return "host to device";
    case Kind::d2h: return "device to host";
  }
  return "?";
}

void start(c10::Device device) {
  Recorder& r = recorder();
  r.events.clear();
  r.warned = false;
  r.cuda = device.is_cuda();
  sync_device();
  r.origin = Clock::now();
  r.on = true;
}

void stop() {
  sync_device();
  recorder().on = false;
}

bool enabled() { return recorder().on; }

std::int64_t now_us() { return since_origin(Clock::now()); }

void record(const Event& event) {
  Recorder& r = recorder();
  if (!r.on) return;
  if (r.events.size() < max_events) {
    r.events.push_back(event);
  } else if (!r.warned) {
    std::fprintf(stderr, "[trace] %zu events recorded on this rank; later ones are not (trace fewer steps)\n",
                 max_events);
    r.warned = true;
  }
}

const std::vector<Event>& events() { return recorder().events; }

Scope::Scope(Kind kind, std::int64_t index, std::int64_t bytes) : on_(enabled()) {
  if (!on_) return;
  sync_device();
  event_ = Event{kind, index, bytes, now_us(), 0};
}

Scope::~Scope() {
  if (!on_ || !enabled()) return;
  sync_device();
  event_.end_us = now_us();
  record(event_);
}

dist::CollectiveSink collective_sink() {
  return [](dist::CollectiveKind kind, std::int64_t bytes, dist::CollectiveClock::time_point begin,
            dist::CollectiveClock::time_point end) {
    if (!enabled()) return;
    record(Event{collective_kind(kind), -1, bytes, since_origin(begin), since_origin(end)});
  };
}

std::vector<std::int64_t> encode(std::span<const Event> events, std::size_t rows) {
  if (rows < events.size()) throw Error("timeline::encode: " + std::to_string(events.size()) + " events in " +
                                        std::to_string(rows) + " rows");
  std::vector<std::int64_t> out(rows * encoded_width, 0);
  for (std::size_t i = 0; i < rows; ++i) {
    std::int64_t* row = out.data() + i * encoded_width;
    if (i >= events.size()) {
      row[0] = -1;
      continue;
    }
    const Event& e = events[i];
    row[0] = static_cast<std::int64_t>(e.kind);
    row[1] = e.index;
    row[2] = e.bytes;
    row[3] = e.begin_us;
    row[4] = e.end_us;
  }
  return out;
}

std::vector<Event> decode(std::span<const std::int64_t> values) {
  if (values.size() % encoded_width != 0)
    throw Error("timeline::decode: " + std::to_string(values.size()) + " values are not rows of " +
                std::to_string(encoded_width));
  std::vector<Event> out;
  for (std::size_t i = 0; i < values.size(); i += encoded_width) {
    const std::int64_t kind = values[i];
    if (kind == -1) continue;
    if (kind < 0 || kind >= kind_count) throw Error("timeline::decode: event kind " + std::to_string(kind));
    out.push_back(Event{static_cast<Kind>(kind), values[i + 1], values[i + 2], values[i + 3], values[i + 4]});
  }
  return out;
}

nlohmann::json chrome_trace(const std::vector<std::vector<Event>>& per_rank, std::span<const std::string> unit_names) {
  nlohmann::json events = nlohmann::json::array();
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    const auto pid = static_cast<std::int64_t>(r);
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "rank " + std::to_string(r)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
    for (const Event& e : per_rank[r]) {
      std::string name(kind_name(e.kind));
      std::string detail;
      switch (e.kind) {
        case Kind::step:
        case Kind::micro_step: detail = std::to_string(e.index); break;
        case Kind::forward:
        case Kind::backward:
          if (e.index >= 0 && static_cast<std::size_t>(e.index) < unit_names.size())
            detail = unit_names[static_cast<std::size_t>(e.index)];
          else if (e.index >= 0)
            detail = "unit " + std::to_string(e.index);
          break;
        case Kind::optimizer: break;
        default: detail = bytes_text(e.bytes); break;
      }
      if (!detail.empty()) name.append(1, ' ').append(detail);
      const char* cat = e.kind == Kind::forward || e.kind == Kind::backward ? "compute"
                        : e.kind == Kind::h2d || e.kind == Kind::d2h      ? "copy"
                        : e.kind == Kind::step || e.kind == Kind::micro_step || e.kind == Kind::optimizer
                            ? "step"
                            : "collective";
      events.push_back({{"ph", "X"},
                        {"name", name},
                        {"cat", cat},
                        {"pid", pid},
                        {"tid", 0},
                        {"ts", e.begin_us},
                        {"dur", std::max<std::int64_t>(e.end_us - e.begin_us, 0)},
                        {"args", {{"index", e.index}, {"bytes", e.bytes}}}});
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const std::filesystem::path& path, const nlohmann::json& trace) {
  const std::string key = "trace=" + path.string() + ": ";
  // Checked again here: a device or FIFO put in its place since the start would be replaced by a plain file.
  if (const std::string problem = replace_problem(path); !problem.empty())
    throw Error(key + problem + "; nothing was written. Give the path of a file to create or replace");
  PartialFile partial;
  try {
    partial = create_partial_file(path);  // a name of its own, never opened through an existing file or link
  } catch (const Error& e) {
    throw Error(key + e.what() + "; choose another path");
  }
  bool ok = write_all(partial.fd, trace.dump() + '\n');
  const std::string write_error = ok ? "" : std::strerror(errno);
  ok = ::close(partial.fd) == 0 && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(partial.path, path, ec);
  if (!ok || ec) {
    const std::string why = ec ? ec.message() : !write_error.empty() ? write_error : std::strerror(errno);
    std::filesystem::remove(partial.path, ec);
    unregister_partial_file(partial.path);
    throw Error(key + "cannot write it (" + why + "); free space on that file system or choose another path");
  }
  unregister_partial_file(partial.path);
}

}  // namespace tessera::timeline
