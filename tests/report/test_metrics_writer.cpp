// The metrics file appears only when a run commits it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "tessera/report/console.hpp"
#include "tessera/report/metrics_writer.hpp"

using namespace tessera;

TEST_CASE("an uncommitted metrics file leaves nothing behind", "[report]") {
  const auto path = std::filesystem::temp_directory_path() / ("tessera-mw-" + std::to_string(::getpid()) + ".jsonl");
  {
    MetricsWriter w(path);
    w.write({{"event", "step"}, {"step", 0}});
    CHECK(std::filesystem::exists(path.string() + ".partial"));
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path.string() + ".partial"));
  {
    MetricsWriter w(path);
    w.write({{"event", "step"}, {"step", 0}});
    w.commit();
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  CHECK(line == R"({"event":"step","step":0})");
  std::filesystem::remove(path);
}

TEST_CASE("the step line has the documented shape", "[report]") {
  StepResult r;
  r.step = 11;
  r.loss = 3.21012;
  r.lr = 1e-3;
  r.tokens = 4060;
  r.step_ms = 812;
  CHECK(format_step_line(r, 100) == "step 12/100 | loss 3.2101 | lr 1.00e-03 | 812 ms | 5.0k tok/s");
  CHECK(format_progress(50, 100, 10.0).find("50/100") != std::string::npos);
}
