#pragma once
// defines: tessera::timeline, the recorder behind trace=FILE: what each rank did when, written as one Chrome trace
// (JSON; Perfetto and chrome://tracing open it) with one lane per rank.
//
//   Kind         step, micro_step, forward / backward (one call of the family's program: its unit), optimizer,
//                all_reduce / all_gather / reduce_scatter / broadcast / barrier (with bytes), h2d / d2h (the
//                offload policies' copies between host and device, with bytes)
//   start(dev)   turns recording on for this process (one rank) from now; stop() turns it off
//   Scope        records [construction, destruction) as one event when recording is on, else costs a branch. On a
//                CUDA device it synchronizes the device at both ends, so an event is the device's time, not the
//                launch's (tracing then serializes what would overlap: a traced run is slower)
//   collective_sink()  a dist::CollectiveSink (dist/traced_communicator.hpp) that records collectives
//   encode/decode      events as int64 rows of a fixed width, for gathering every rank's to rank 0
//   chrome_trace       the trace of every rank's events; unit_names name the units of forward/backward events
//
// Times are microseconds since start(); ranks start together (the trainer starts recording after a barrier).
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dist/traced_communicator.hpp"

namespace tessera::timeline {

enum class Kind : std::int64_t {
  step,
  micro_step,
  forward,
  backward,
  optimizer,
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  barrier,
  h2d,
  d2h,
};
inline constexpr std::int64_t kind_count = 12;
std::string_view kind_name(Kind kind);

struct Event {
  Kind kind = Kind::step;
  std::int64_t index = -1;  // the step, micro-step or unit; -1 when none
  std::int64_t bytes = 0;   // collectives and copies
  std::int64_t begin_us = 0;
  std::int64_t end_us = 0;
};

void start(c10::Device device);
void stop();
bool enabled();
std::int64_t now_us();
void record(const Event& event);
// This process's events, in the order they ended.
const std::vector<Event>& events();

class Scope {
 public:
  explicit Scope(Kind kind, std::int64_t index = -1, std::int64_t bytes = 0);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool on_;
  Event event_;
};

dist::CollectiveSink collective_sink();

inline constexpr std::size_t encoded_width = 5;
// rows of encoded_width values, padded to `rows` events with rows whose kind is -1.
std::vector<std::int64_t> encode(std::span<const Event> events, std::size_t rows);
// The inverse; padding rows are dropped. Throws Error on a kind out of range.
std::vector<Event> decode(std::span<const std::int64_t> values);

// {"traceEvents": [...], "displayTimeUnit": "ms"}: per rank r a process "rank r" (pid r) with one thread, complete
// ("X") events named "<kind> <unit name>" (forward, backward) or "<kind> <bytes>" (collectives, copies) or
// "step s" / "micro-step m", args {index, bytes}.
nlohmann::json chrome_trace(const std::vector<std::vector<Event>>& per_rank, std::span<const std::string> unit_names);

// Writes the trace to `path` through a new `<path>.partial-<pid>` renamed into place (core/new_file.hpp; no partial
// file is left on failure).
void write_chrome_trace(const std::filesystem::path& path, const nlohmann::json& trace);

}  // namespace tessera::timeline
