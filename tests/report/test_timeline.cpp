// report/timeline.hpp: events only while recording, encode/decode for the gather, the Chrome trace's shape (one
// process per rank, complete events named by unit and bytes) and its writing (no partial file on failure).
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/report/timeline.hpp"

using namespace tessera;
namespace tl = tessera::timeline;

TEST_CASE("timeline records scopes and collectives only between start and stop", "[report]") {
  { const tl::Scope before(tl::Kind::step, 0); }
  tl::start(c10::Device(c10::kCPU));
  CHECK(tl::enabled());
  CHECK(tl::events().empty());
  {
    const tl::Scope step(tl::Kind::step, 3);
    { const tl::Scope fwd(tl::Kind::forward, 2); }
    const auto t = dist::CollectiveClock::now();
    tl::collective_sink()(dist::CollectiveKind::reduce_scatter, 4096, t, t + std::chrono::microseconds(5));
  }
  tl::stop();
  { const tl::Scope after(tl::Kind::step, 9); }
  const std::vector<tl::Event>& ev = tl::events();
  REQUIRE(ev.size() == 3);
  CHECK(ev[0].kind == tl::Kind::forward);  // in the order they ended
  CHECK(ev[0].index == 2);
  CHECK(ev[1].kind == tl::Kind::reduce_scatter);
  CHECK(ev[1].bytes == 4096);
  CHECK(ev[1].end_us - ev[1].begin_us == 5);
  CHECK(ev[2].kind == tl::Kind::step);
  CHECK(ev[2].index == 3);
  CHECK(ev[2].begin_us <= ev[0].begin_us);
  CHECK(ev[2].end_us >= ev[0].end_us);
  for (const tl::Event& e : ev) CHECK(e.begin_us <= e.end_us);
}

TEST_CASE("timeline keeps a rank's first million events and drops the rest", "[report]") {
  tl::start(c10::Device(c10::kCPU));
  for (std::int64_t i = 0; i < 1'000'005; ++i) tl::record(tl::Event{tl::Kind::forward, i, 0, i, i});
  tl::stop();
  REQUIRE(tl::events().size() == 1'000'000);
  CHECK(tl::events().back().index == 999'999);
  tl::start(c10::Device(c10::kCPU));  // a new recording starts empty
  CHECK(tl::events().empty());
  tl::stop();
}

TEST_CASE("timeline events survive encode and decode, padding rows are dropped", "[report]") {
  const std::vector<tl::Event> ev{{tl::Kind::all_gather, -1, 123, 10, 20}, {tl::Kind::backward, 4, 0, 30, 45}};
  const std::vector<std::int64_t> rows = tl::encode(ev, 5);
  CHECK(rows.size() == 5 * tl::encoded_width);
  const std::vector<tl::Event> back = tl::decode(rows);
  REQUIRE(back.size() == 2);
  CHECK(back[0].kind == tl::Kind::all_gather);
  CHECK(back[0].bytes == 123);
  CHECK(back[1].index == 4);
  CHECK(back[1].end_us == 45);
  CHECK_THROWS_AS(tl::encode(ev, 1), Error);
  std::vector<std::int64_t> bad = rows;
  bad[0] = 99;
  CHECK_THROWS_AS(tl::decode(bad), Error);
  CHECK_THROWS_AS(tl::decode(std::vector<std::int64_t>(7, 0)), Error);
}

TEST_CASE("the Chrome trace has a lane per rank and names events by unit and bytes", "[report]") {
  const std::vector<std::string> units{"model.embed_tokens", "model.layers.0"};
  const std::vector<std::vector<tl::Event>> per_rank{
      {{tl::Kind::forward, 1, 0, 0, 10}, {tl::Kind::all_reduce, -1, 3 * 1024 * 1024 / 2, 10, 20}},
      {{tl::Kind::backward, 1, 0, 5, 9}, {tl::Kind::h2d, 0, 512, 9, 12}, {tl::Kind::step, 0, 0, 0, 30}}};
  const nlohmann::json trace = tl::chrome_trace(per_rank, units);
  REQUIRE(trace.contains("traceEvents"));
  std::vector<std::string> lanes, names;
  std::vector<std::int64_t> pids;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") lanes.push_back(e["args"]["name"]);
    if (e["ph"] == "X") {
      names.push_back(e["name"]);
      pids.push_back(e["pid"]);
      CHECK(e["dur"].get<std::int64_t>() >= 0);
    }
  }
  CHECK(lanes == std::vector<std::string>{"rank 0", "rank 1"});
  CHECK(names == std::vector<std::string>{"forward model.layers.0", "all-reduce 1.5 MiB", "backward model.layers.0",
                                          "host to device 512 B", "step 0"});
  CHECK(pids == std::vector<std::int64_t>{0, 0, 1, 1, 1});
}

TEST_CASE("write_chrome_trace leaves the file or nothing", "[report]") {
  const auto dir = std::filesystem::temp_directory_path() / ("tessera_trace_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const nlohmann::json trace = tl::chrome_trace({{{tl::Kind::step, 0, 0, 0, 1}}}, {});
  tl::write_chrome_trace(dir / "t.json", trace);
  std::ifstream in(dir / "t.json");
  CHECK(nlohmann::json::parse(in) == trace);
  // t.json alone: no temporary file left
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 1);
  CHECK_THROWS_WITH(tl::write_chrome_trace(dir / "missing" / "t.json", trace), Catch::Contains("trace="));
  CHECK_FALSE(std::filesystem::exists(dir / "missing"));
  CHECK_THROWS_WITH(tl::write_chrome_trace("/dev/null", trace),
                    "trace=/dev/null: is a character device, not a regular file; nothing was written. Give the path "
                    "of a file to create or replace");
  std::filesystem::remove_all(dir);
}
