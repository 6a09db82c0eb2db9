// tests for report/html_report.hpp: reading metrics files back and the page's bars, lines and table.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/report/html_report.hpp"
#include "scratch_dir.hpp"

using namespace tessera;
using report::read_metrics;

namespace {

std::filesystem::path write_file(const std::string& name, const std::string& text) {
  static const auto dir = testing::fresh_dir("report");
  std::ofstream(dir / name) << text;
  return dir / name;
}

std::string memory_line(int step, int rank, const char* phase, long params, long grads, long optim, long acts) {
  const long allocated = params + grads + optim + acts;
  return R"({"event":"memory","step":)" + std::to_string(step) + R"(,"micro":0,"rank":)" + std::to_string(rank) +
         R"(,"phase":")" + phase + R"(","params":)" + std::to_string(params) + R"(,"grads":)" + std::to_string(grads) +
         R"(,"optim":)" + std::to_string(optim) + R"(,"acts":)" + std::to_string(acts) +
         R"(,"params_cpu":0,"grads_cpu":0,"optim_cpu":0,"allocated":)" + std::to_string(allocated) +
         R"(,"peak":)" + std::to_string(allocated + 5) + R"(,"reserved":)" + std::to_string(allocated) + "}\n";
}

// A two-rank run with steps 0..2 and memory at steps 0 and 1.
std::string two_rank_run() {
  std::string s = R"({"event":"run","family":"llama","model":"tiny","sharding":"full_shard","precision":"32-true","optimizer":"adamw","checkpointing":"none","offload":"none","adapter":"none","world_size":2,"device":"cpu","batch_size":2,"accumulate_grad_batches":1})"
                  "\n";
  for (int step : {0, 1})
    for (int rank : {0, 1}) {
      s += memory_line(step, rank, "before_fwd", 100, 0, step ? 200 : 0, 10);
      s += memory_line(step, rank, "after_fwd", 100, 0, step ? 200 : 0, 300 + rank);
      s += memory_line(step, rank, "after_bwd", 100, 100, step ? 200 : 0, 10);
      s += memory_line(step, rank, "after_opt", 100, 0, 200, 0);
    }
  for (int step : {0, 1, 2})
    s += R"({"event":"step","step":)" + std::to_string(step) + R"(,"loss":)" + std::to_string(3.0 - step * 0.5) +
         R"(,"lr":0.001,"tokens":128,"step_ms":)" + std::to_string(step ? 10.0 : 50.0) + "}\n";
  s += R"({"event":"prediction","peak":690,"phases":[]})"
       "\n";
  s += R"({"event":"done","train_s":0.07,"peak":700,"predicted_peak":690,"steps":3,"world_size":2,"tokens_per_s":1800.0})"
       "\n";
  return s;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("read_metrics reads every record kind back", "[report]") {
  const report::RunMetrics m = read_metrics(write_file("fsdp.jsonl", two_rank_run()));
  CHECK(m.label == "fsdp");
  CHECK(m.run["sharding"] == "full_shard");
  CHECK(m.memory.size() == 16);
  CHECK(m.steps.size() == 3);
  CHECK(m.world_size() == 2);
  CHECK(m.memory_step() == 1);
  REQUIRE(m.bar(1, "after_fwd") != nullptr);
  CHECK(m.bar(1, "after_fwd")->acts == 301);
  CHECK(m.bar(1, "after_fwd")->step == 1);
  CHECK(m.bar(2, "after_fwd") == nullptr);
  CHECK(m.mean_step_ms() == Approx(10.0));  // the first step (50 ms of warm-up) is left out
  CHECK(m.mean_mfu() == 0.0);
}

TEST_CASE("the page draws a stacked bar per rank and phase, a peak per run, a loss line per run", "[report]") {
  const report::RunMetrics a = read_metrics(write_file("fsdp.jsonl", two_rank_run()));
  report::RunMetrics b = a;
  b.label = "second <run>";
  const std::vector<report::RunMetrics> runs{a, b};
  const std::string page = report::html_report(runs, "t & t");
  // Per run: 2 ranks x 4 phases; params in every bar, optimizer state in all four (step 1), grads only after
  // backward, activations wherever they are non-zero (every phase but after_opt).
  CHECK(count(page, "class=\"seg params\"") == 2 * 2 * 4);
  CHECK(count(page, "class=\"seg optim\"") == 2 * 2 * 4);
  CHECK(count(page, "class=\"seg grads\"") == 2 * 2 * 1);
  CHECK(count(page, "class=\"seg acts\"") == 2 * 2 * 3);
  CHECK(count(page, "class=\"seg host\"") == 0);
  CHECK(count(page, "class=\"peak\"") == 2);
  CHECK(count(page, "class=\"predicted\"") == 2);
  CHECK(count(page, "class=\"loss-line\"") == 2);
  CHECK(count(page, "<tr><td>") == 2);
  CHECK(page.find("data-bytes=\"301\"") != std::string::npos);  // rank 1's activations after forward
  CHECK(page.find("second &lt;run&gt;") != std::string::npos);  // labels are escaped
  CHECK(page.find("second <run>") == std::string::npos);
  CHECK(page.find("<title>t &amp; t</title>") != std::string::npos);
  CHECK(page.find("<script") == std::string::npos);  // self-contained and static
}

TEST_CASE("read_metrics refuses what is not a finished run's metrics file", "[report]") {
  CHECK_THROWS_WITH(read_metrics("/nonexistent/m.jsonl"), Catch::Contains("/nonexistent/m.jsonl: cannot be read"));
  CHECK_THROWS_WITH(read_metrics(write_file("bad.jsonl", "{\"event\":\"run\"}\n{oops\n")),
                    Catch::Contains("bad.jsonl:2: not a JSON record"));
  CHECK_THROWS_WITH(read_metrics(write_file("noevent.jsonl", "[1,2]\n")),
                    Catch::Contains("noevent.jsonl:1: a record without an \"event\""));
  CHECK_THROWS_WITH(read_metrics(write_file("nodone.jsonl", "{\"event\":\"run\"}\n")),
                    Catch::Contains("nodone.jsonl: no \"done\" record"));
  CHECK_THROWS_WITH(read_metrics(write_file("field.jsonl", "{\"event\":\"step\",\"step\":0,\"loss\":1.0,\"tokens\":4}\n")),
                    Catch::Contains("field.jsonl:1: the record has no \"step_ms\""));
  CHECK_THROWS_WITH(read_metrics(write_file("type.jsonl", "{\"event\":\"done\",\"peak\":\"big\",\"train_s\":1}\n")),
                    Catch::Contains("type.jsonl:1: \"peak\" is \"big\", not an integer"));
  CHECK_THROWS_AS(report::html_report({}, "none"), Error);
}

TEST_CASE("read_metrics checks the type of every field it reads, optional ones included", "[report]") {
  const std::string memory = "{\"event\":\"memory\",\"step\":0,\"micro\":0,\"rank\":0,\"phase\":\"after_fwd\","
                             "\"params\":1,\"grads\":0,\"optim\":0,\"acts\":0,\"allocated\":1,\"peak\":1,\"reserved\":1";
  const std::string done = "{\"event\":\"done\",\"peak\":1,\"train_s\":0.5}\n";
  CHECK_THROWS_WITH(read_metrics(write_file("cpu.jsonl", memory + ",\"params_cpu\":\"x\"}\n" + done)),
                    Catch::Contains("cpu.jsonl:1: \"params_cpu\" is \"x\", not an integer"));
  CHECK_THROWS_WITH(read_metrics(write_file("skip.jsonl", "{\"event\":\"step\",\"step\":0,\"loss\":1.0,\"step_ms\":1,"
                                                          "\"tokens\":4,\"skipped\":1}\n" + done)),
                    Catch::Contains("skip.jsonl:1: \"skipped\" is 1, not true or false"));
  CHECK_THROWS_WITH(read_metrics(write_file("pred.jsonl", "{\"event\":\"done\",\"peak\":1,\"train_s\":1,"
                                                          "\"predicted_peak\":\"big\"}\n")),
                    Catch::Contains("pred.jsonl:1: \"predicted_peak\" is \"big\", not a number"));
  // A number past a double's range is a parse failure like any other, not an escaping JSON exception.
  CHECK_THROWS_WITH(read_metrics(write_file("huge.jsonl", "{\"event\":\"step\",\"loss\":1e999}\n")),
                    Catch::Contains("huge.jsonl:1: not a JSON record"));
  CHECK_THROWS_WITH(read_metrics(write_file("deep.jsonl", "{\"event\":\"run\",\"x\":" + std::string(100, '[') +
                                                          std::string(100, ']') + "}\n")),
                    Catch::Contains("deep.jsonl:1: the record nests deeper than"));
  // A rate of a run that ran no step is written as null (JSON has no NaN): read as absent.
  const report::RunMetrics m = read_metrics(write_file("null.jsonl", "{\"event\":\"done\",\"peak\":1,\"train_s\":0,"
                                                             "\"tokens_per_s\":null}\n"));
  CHECK_FALSE(m.done.contains("tokens_per_s"));
  const report::RunMetrics runs[] = {m};
  CHECK_NOTHROW(report::html_report(runs, "no steps"));
}

TEST_CASE("read_metrics bounds every count it reads, naming the file, the line and the field", "[report]") {
  const std::string done = "{\"event\":\"done\",\"peak\":1,\"train_s\":0.5}\n";
  const std::string memory = "{\"event\":\"memory\",\"step\":1,\"micro\":0,\"phase\":\"after_fwd\",\"params\":1,"
                             "\"grads\":0,\"optim\":0,\"acts\":0,\"allocated\":1,\"peak\":1,\"reserved\":1,\"rank\":";
  // Once: world_size 10^12 drew bars without end; rank 10^9 allocated until std::bad_alloc.
  CHECK_THROWS_WITH(read_metrics(write_file("world.jsonl", "{\"event\":\"done\",\"peak\":1,\"train_s\":0.5,"
                                                           "\"world_size\":1000000000000}\n")),
                    Catch::EndsWith("world.jsonl:1: \"world_size\" is 1000000000000; a world size is 1 to 4096 (a "
                                    "report draws at most 4096 ranks); this is not a metrics file a tessera run wrote"));
  CHECK_THROWS_WITH(read_metrics(write_file("float.jsonl", "{\"event\":\"done\",\"peak\":1,\"train_s\":0.5,"
                                                           "\"world_size\":1e12}\n")),
                    Catch::Contains("float.jsonl:1: \"world_size\" is 1000000000000.0, not an integer"));
  CHECK_THROWS_WITH(read_metrics(write_file("rank.jsonl", memory + "1000000000}\n" + done)),
                    Catch::Contains("rank.jsonl:1: \"rank\" is 1000000000; a rank is 0 to 4095"));
  CHECK_THROWS_WITH(read_metrics(write_file("urank.jsonl", memory + "18446744073709551615}\n" + done)),
                    Catch::Contains("urank.jsonl:1: \"rank\" is 18446744073709551615; a rank is 0 to 4095"));
  CHECK_THROWS_WITH(read_metrics(write_file("beyond.jsonl", memory + "3}\n{\"event\":\"done\",\"peak\":1,"
                                                            "\"train_s\":0.5,\"world_size\":2}\n")),
                    Catch::Contains("beyond.jsonl:1: \"rank\" is 3, but the done record (line 2) says "
                                    "\"world_size\" 2"));
  CHECK_THROWS_WITH(read_metrics(write_file("step.jsonl", "{\"event\":\"step\",\"step\":-1,\"loss\":1,\"step_ms\":1,"
                                                          "\"tokens\":4}\n" + done)),
                    Catch::Contains("step.jsonl:1: \"step\" is -1; an index of a step is 0 to 1000000000000"));
  CHECK_THROWS_WITH(read_metrics(write_file("bytes.jsonl", memory.substr(0, memory.find("\"params\":1")) +
                                                           "\"params\":9223372036854775807" +
                                                           memory.substr(memory.find(",\"grads\"")) + "0}\n" + done)),
                    Catch::Contains("bytes.jsonl:1: \"params\" is 9223372036854775807; a memory figure is within"));
  CHECK_THROWS_WITH(read_metrics(write_file("loss.jsonl", "{\"event\":\"step\",\"step\":0,\"loss\":1e300,"
                                                          "\"step_ms\":1,\"tokens\":4}\n" + done)),
                    Catch::Contains("loss.jsonl:1: \"loss\" is 1e+300, beyond a float's range"));
  CHECK_THROWS_WITH(read_metrics(write_file("long.jsonl", "{\"event\":\"run\",\"x\":\"" + std::string(2 << 20, 'x') +
                                                          "\"}\n" + done)),
                    Catch::Contains("long.jsonl:1: a line longer than 1048576 bytes"));
  const auto fifo = write_file("fifo.jsonl", "").parent_path() / "pipe.jsonl";
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);  // no writer: once, the report blocked in open()
  CHECK_THROWS_WITH(read_metrics(fifo), Catch::Contains("pipe.jsonl: cannot be read (is a FIFO, not a regular file)"));
}

TEST_CASE("the axes' ticks end on huge, flat and tiny ranges", "[report]") {
  // Once: 5000 added to 1e20 is 1e20, and the tick loop over losses of 1e20 and 1e20 + 16384 never ended.
  const auto page_of = [](const std::string& name, const std::string& loss_a, const std::string& loss_b,
                          std::int64_t last_step) {
    const report::RunMetrics run = read_metrics(write_file(
        name, "{\"event\":\"step\",\"step\":0,\"loss\":" + loss_a + ",\"step_ms\":1,\"tokens\":4}\n"
              "{\"event\":\"step\",\"step\":" + std::to_string(last_step) + ",\"loss\":" + loss_b +
              ",\"step_ms\":1,\"tokens\":4}\n{\"event\":\"done\",\"peak\":9007199254740992,\"train_s\":0.5,"
              "\"predicted_peak\":1}\n"));
    const report::RunMetrics runs[] = {run};
    return report::html_report(runs, name);
  };
  for (const std::string page : {page_of("huge.jsonl", "100000000000000000000", "100000000000000016384", 1),
                                 page_of("flat.jsonl", "1e20", "1e20", 1),
                                 page_of("wide.jsonl", "-3.4e38", "3.4e38", 1000000000000),
                                 page_of("tiny.jsonl", "1.0", "1.0000000001", 1)}) {
    CHECK(count(page, "class=\"loss-line\"") == 1);
    CHECK(page.find("nan") == std::string::npos);
    CHECK(page.find("inf") == std::string::npos);
    CHECK(count(page, "stroke=\"#ddd\"") < 100);  // grid lines: a handful per axis
  }
}
