// tests: io/json_file.hpp: nesting bounded before parsing, only regular files read, bounded excerpts.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/json_file.hpp"

using namespace tessera::io;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("json_nesting_error counts arrays and objects, not brackets inside strings", "[io]") {
  CHECK_FALSE(json_nesting_error(nested(64)));
  CHECK(json_nesting_error(nested(65)).value() == "nests deeper than 64 levels (at byte 64)");
  CHECK_FALSE(json_nesting_error(R"({"a":{"b":[1,2,{"c":null}]}})", 4));
  CHECK(json_nesting_error(R"({"a":{"b":[1,2,{"c":null}]}})", 3));
  // Brackets in strings, and an escaped quote that must not end the string early.
  CHECK_FALSE(json_nesting_error(R"({"k":"[[[[{{{{\"[[[["})", 1));
  CHECK(json_nesting_error(nested(100'000)));
}

TEST_CASE("read_json_file refuses deep nesting, directories, FIFOs and missing files by name", "[io]") {
  const fs::path dir = tessera::testing::fresh_dir("json");
  const fs::path deep = dir / "deep.json";
  std::ofstream(deep) << "{\"rope_scaling\":" << nested(100'000) << "}";
  CHECK_THROWS_MATCHES(read_json_file(deep, "hint"), tessera::FormatError,
                       Catch::Matchers::Message(deep.string() + ": is not accepted: its JSON nests deeper than 64 levels "
                                                                "(at byte 79); hint"));
  fs::create_directories(dir / "config.json");
  CHECK_THROWS_WITH(read_json_file(dir / "config.json", ""), Contains("config.json: is a directory, not a JSON file"));
  REQUIRE(::mkfifo((dir / "fifo.json").c_str(), 0600) == 0);  // would block an open() for reading
  CHECK_THROWS_WITH(read_json_file(dir / "fifo.json", ""), Contains("fifo.json: is not a regular file"));
  CHECK_THROWS_WITH(read_json_file(dir / "absent.json", "needs it"), Contains("absent.json: cannot open") && Contains("; needs it"));
  std::ofstream(dir / "bad.json") << "{\"a\":";
  CHECK_THROWS_WITH(read_json_file(dir / "bad.json", ""), Contains("bad.json: is not valid JSON"));
  std::ofstream(dir / "ok.json") << R"({"a": [1, {"b": true}]})";
  CHECK(read_json_file(dir / "ok.json", "")["a"][1]["b"] == true);
  fs::remove_all(dir);
}

TEST_CASE("json_excerpt is bounded and ASCII, json_type_phrase names the type", "[io]") {
  const nlohmann::json long_array(std::vector<int>(1000, 7));
  const std::string text = json_excerpt(long_array, 20);
  CHECK(text == "[7,7,7,7,7,7,7,7,7,7...");
  CHECK(json_excerpt(nlohmann::json("\xc3\xa9")) == "\"\\u00e9\"");
  CHECK(json_type_phrase(nlohmann::json(1)) == "a number");
  CHECK(json_type_phrase(nlohmann::json(nullptr)) == "null");
  CHECK(json_type_phrase(nlohmann::json(true)) == "a boolean");
  CHECK(json_type_phrase(nlohmann::json::object()) == "an object");
}
