// The metrics file appears only when a run commits it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include "tessera/core/error.hpp"
#include "tessera/report/console.hpp"
#include "tessera/report/metrics_writer.hpp"

using namespace tessera;

TEST_CASE("an uncommitted metrics file leaves nothing behind", "[report]") {
  const auto path = std::filesystem::temp_directory_path() / ("tessera-mw-" + std::to_string(::getpid()) + ".jsonl");
  const std::string partial = path.string() + ".partial-" + std::to_string(::getpid());
  {
    MetricsWriter w(path);
    w.write({{"event", "step"}, {"step", 0}});
    CHECK(std::filesystem::exists(partial));
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(partial));
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

TEST_CASE("a metrics line that cannot be written is an error at once, naming the setting", "[report]") {
  const auto path = std::filesystem::temp_directory_path() / ("tessera-mw-full-" + std::to_string(::getpid()) + ".jsonl");
  // A 4 KiB file size limit stands in for a full disk: writes past it fail with EFBIG (SIGXFSZ ignored).
  struct rlimit saved {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string message;
  int written = 0;
  {
    MetricsWriter w(path);
    try {
      for (; written < 1000; ++written) w.write({{"event", "step"}, {"padding", std::string(100, 'x')}});
    } catch (const tessera::Error& e) {
      message = e.what();
    }
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  CHECK(written < 40);  // about 4096 / 128 lines fit
  CHECK_THAT(message, Catch::StartsWith("metrics=" + path.string() + ": cannot write line ") &&
                          Catch::Contains("File too large"));
  CHECK_FALSE(std::filesystem::exists(path.string() + ".partial-" + std::to_string(::getpid())));
}

TEST_CASE("a metrics path that is a directory or a device is refused", "[report]") {
  CHECK_THROWS_WITH(MetricsWriter(std::filesystem::temp_directory_path()), Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(MetricsWriter("/dev/null"), "metrics=/dev/null: exists and is not a regular file (a device, FIFO or "
                                                "socket); give the path of a file to create or replace");
}

TEST_CASE("the step line has the documented shape", "[report]") {
  StepResult r;
  r.step = 11;
  r.loss = 3.21012;
  r.lr = 1e-3;
  r.tokens = 4060;
  r.step_ms = 812;
  CHECK(format_step_line(r, 100) == "step 12/100 | loss 3.2101 | lr 1.00e-03 | 812 ms | 5.0k tok/s");
  r.mfu = 0.4126;  // known MFU (report/mfu.hpp) follows the rate
  CHECK(format_step_line(r, 100) == "step 12/100 | loss 3.2101 | lr 1.00e-03 | 812 ms | 5.0k tok/s | MFU 41.3%");
  CHECK(format_progress(50, 100, 10.0).find("50/100") != std::string::npos);
}

TEST_CASE("a link planted where the metrics' temporary file goes is never written through", "[report]") {
  // Once "ln -s train.bin m.jsonl.partial" turned a 40,000-byte data file into the run's metrics.
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-mw-link-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "train.bin") << "the data";
  for (const std::string& suffix : {std::string(".partial"), ".partial-" + std::to_string(::getpid())})
    std::filesystem::create_symlink(dir / "train.bin", dir / ("m.jsonl" + suffix));
  {
    MetricsWriter w(dir / "m.jsonl");
    w.write({{"event", "done"}});
    w.commit();
  }
  std::string data, metrics;
  std::getline(std::ifstream(dir / "train.bin"), data);
  std::getline(std::ifstream(dir / "m.jsonl"), metrics);
  CHECK(data == "the data");
  CHECK(metrics == R"({"event":"done"})");
  CHECK(std::filesystem::is_symlink(dir / ("m.jsonl.partial-" + std::to_string(::getpid()))));  // left alone
  std::filesystem::remove_all(dir);
}
