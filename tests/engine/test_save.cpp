// tests: engine/save.hpp: a Hugging Face dir appears whole or not at all: a failure or a SIGTERM in the
// middle of a save leaves nothing, and a trailing slash in the target is harmless.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/save.hpp"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

// A model family reduced to what save_hf_dir asks of it; its config decides how write_config behaves.
struct FakeModel {
  enum class Config { writes, throws, is_killed };
  static void write_config(const fs::path& path, Config config, std::string_view) {
    std::ofstream(path) << "{}";
    if (config == Config::throws) throw Error("config writer failed on purpose");
    if (config == Config::is_killed) std::raise(SIGTERM);
  }
};

ParamStore small_store() {
  ParamStore store({ParamSpec{"w", {4, 4}, 0, ParamInit::normal}}, c10::ScalarType::Float, c10::Device(c10::kCPU));
  store.initialize(0.02, 1);
  return store;
}

}  // namespace

TEST_CASE("save_hf_dir: whole directory, trailing slash or not, nothing on failure", "[engine]") {
  const fs::path dir = tessera::testing::fresh_dir("save");
  const ParamStore store = small_store();
  save_hf_dir<FakeModel>((dir / "out/").string(), FakeModel::Config::writes, store, store.full_units());
  CHECK(fs::is_regular_file(dir / "out/config.json"));
  CHECK(fs::is_regular_file(dir / "out/model.safetensors"));
  CHECK_THROWS_WITH(save_hf_dir<FakeModel>(dir / "failed", FakeModel::Config::throws, store, store.full_units()),
                    "config writer failed on purpose");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);  // only out/
  fs::remove_all(dir);
}

TEST_CASE("save_hf_dir: SIGTERM in the middle of a save leaves no partial directory", "[engine]") {
  const fs::path dir = tessera::testing::fresh_dir("save");
  const int status = tessera::testing::status_of_child([&] {
    const ParamStore store = small_store();
    save_hf_dir<FakeModel>(dir / "out", FakeModel::Config::is_killed, store, store.full_units());
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST_CASE("save_hf_dir copies the processor and tokenizer files of the model dir it started from", "[engine]") {
  const fs::path dir = tessera::testing::fresh_dir("save-companions");
  fs::create_directories(dir / "model");
  std::ofstream(dir / "model/preprocessor_config.json") << R"({"image_mean": [0.5, 0.5, 0.5]})";
  std::ofstream(dir / "model/tokenizer.json") << "{}";
  std::ofstream(dir / "model/notes.txt") << "not a Hugging Face file";
  fs::create_directories(dir / "model/vocab.json");  // a directory of that name is not copied
  const ParamStore store = small_store();
  save_hf_dir<FakeModel>(dir / "out", FakeModel::Config::writes, store, store.full_units(), dir / "model");
  CHECK(fs::is_regular_file(dir / "out/preprocessor_config.json"));
  CHECK(fs::file_size(dir / "out/preprocessor_config.json") == fs::file_size(dir / "model/preprocessor_config.json"));
  CHECK(fs::is_regular_file(dir / "out/tokenizer.json"));
  CHECK_FALSE(fs::exists(dir / "out/notes.txt"));
  CHECK_FALSE(fs::exists(dir / "out/vocab.json"));
  save_hf_dir<FakeModel>(dir / "preset", FakeModel::Config::writes, store, store.full_units());  // no source: none
  CHECK_FALSE(fs::exists(dir / "preset/preprocessor_config.json"));
  fs::remove_all(dir);
}
