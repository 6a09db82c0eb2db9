// tests: tessera::io::CheckpointDir and write_checkpoint_dir: single and sharded layouts, index errors, cleanup.
#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/io/checkpoint_dir.hpp"

namespace {

namespace fs = std::filesystem;
using namespace tessera::io;
using Catch::Contains;
using nlohmann::json;

// A fresh directory under the system temp dir, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string name = (fs::temp_directory_path() / "tessera-ckpt-test-XXXXXX").string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path_ = name;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_raw(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_raw(const fs::path& path, const std::string& content) { std::ofstream(path, std::ios::binary) << content; }

std::string as_string(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Tensors with distinct byte patterns; the deque keeps each buffer at a fixed address for the views.
struct TensorSet {
  std::deque<std::vector<std::byte>> buffers;
  std::vector<TensorView> views;

  void add(const std::string& name, StDType dtype, std::vector<std::int64_t> shape) {
    std::size_t bytes = dtype_size(dtype);
    for (std::int64_t dim : shape) bytes *= static_cast<std::size_t>(dim);
    auto& buffer = buffers.emplace_back(bytes);
    for (std::size_t i = 0; i < bytes; ++i) buffer[i] = static_cast<std::byte>(i * 7 + views.size() * 31);
    views.push_back({name, dtype, std::move(shape), buffer});
  }
};

// Five F32 [4] tensors of 16 bytes each: 80 bytes in all.
TensorSet five_tensors() {
  TensorSet set;
  for (int i = 0; i < 5; ++i) set.add("layers." + std::to_string(i) + ".weight", StDType::F32, {4});
  return set;
}

void require_same_tensors(const CheckpointDir& checkpoint, const TensorSet& set) {
  std::vector<std::string> expected_names;
  for (const auto& view : set.views) {
    expected_names.push_back(view.name);
    const TensorInfo& info = checkpoint.info(view.name);
    CHECK(info.dtype == view.dtype);
    CHECK(info.shape == view.shape);
    CHECK(as_string(checkpoint.bytes(view.name)) == as_string(view.data));
    CHECK(checkpoint.find(view.name) == &info);
  }
  std::sort(expected_names.begin(), expected_names.end());
  CHECK(checkpoint.names() == expected_names);
}

void require_open_fails(const fs::path& dir, std::initializer_list<std::string> fragments) {
  std::string message;
  try {
    CheckpointDir::open(dir);
  } catch (const tessera::FormatError& error) {
    message = error.what();
  }
  INFO("message: " << message);
  REQUIRE_FALSE(message.empty());
  for (const auto& fragment : fragments) CHECK_THAT(message, Contains(fragment));
}

const std::vector<std::string> kThreeShardFiles{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                                "model-00003-of-00003.safetensors", "model.safetensors.index.json"};

}  // namespace

TEST_CASE("checkpoint_dir: a small checkpoint is one model.safetensors", "[io]") {
  TempDir dir;
  TensorSet set = five_tensors();
  set.add("empty", StDType::BF16, {0});
  set.add("scalar", StDType::I64, {});
  const fs::path model_dir = dir / "nested" / "model";  // created on demand
  write_checkpoint_dir(model_dir, set.views);
  CHECK(entries(model_dir) == std::vector<std::string>{"model.safetensors"});
  CHECK(SafetensorsFile::open(model_dir / "model.safetensors").metadata() ==
        std::map<std::string, std::string>{{"format", "pt"}});

  const auto checkpoint = CheckpointDir::open(model_dir);
  require_same_tensors(checkpoint, set);
  CHECK(checkpoint.find("lm_head.weight") == nullptr);
  CHECK_THROWS_WITH(checkpoint.info("lm_head.weight"), Contains("'lm_head.weight'") && Contains(model_dir.string()));
  CHECK_THROWS_AS(checkpoint.bytes("lm_head.weight"), tessera::FormatError);
}

TEST_CASE("checkpoint_dir: a large checkpoint is sharded with Hugging Face's names and index", "[io]") {
  TempDir dir;
  const TensorSet set = five_tensors();
  write_checkpoint_dir(dir.path(), set.views, 40);  // 16 + 16 fit in 40 bytes, a third would not
  REQUIRE(entries(dir.path()) == kThreeShardFiles);

  const json index = json::parse(read_raw(dir / "model.safetensors.index.json"));
  CHECK(index["metadata"]["total_size"] == 80);
  const json expected_map = {{"layers.0.weight", kThreeShardFiles[0]},
                             {"layers.1.weight", kThreeShardFiles[0]},
                             {"layers.2.weight", kThreeShardFiles[1]},
                             {"layers.3.weight", kThreeShardFiles[1]},
                             {"layers.4.weight", kThreeShardFiles[2]}};
  CHECK(index["weight_map"] == expected_map);
  CHECK(read_raw(dir / "model.safetensors.index.json") == index.dump(2) + "\n");
  CHECK(SafetensorsFile::open(dir / kThreeShardFiles[2]).tensors().size() == 1);

  const auto checkpoint = CheckpointDir::open(dir.path());
  require_same_tensors(checkpoint, set);
  CHECK_THROWS_WITH(checkpoint.bytes("missing"), Contains("'missing'") && Contains(dir.path().string()));
}

TEST_CASE("checkpoint_dir: a tensor larger than the shard limit gets a shard of its own", "[io]") {
  TempDir dir;
  TensorSet set;
  set.add("small.a", StDType::U8, {8});
  set.add("big", StDType::F32, {16});
  set.add("small.b", StDType::U8, {8});
  write_checkpoint_dir(dir.path(), set.views, 16);
  REQUIRE(entries(dir.path()) == kThreeShardFiles);
  CHECK(SafetensorsFile::open(dir / kThreeShardFiles[1]).tensors().front().name == "big");
  require_same_tensors(CheckpointDir::open(dir.path()), set);

  SECTION("a single tensor over the limit stays one model.safetensors, as Hugging Face does") {
    TempDir single;
    write_checkpoint_dir(single.path(), std::span(set.views).subspan(1, 1), 16);
    CHECK(entries(single.path()) == std::vector<std::string>{"model.safetensors"});
  }
}

TEST_CASE("checkpoint_dir: rewriting replaces the other layout's files", "[io]") {
  TempDir dir;
  const TensorSet set = five_tensors();
  write_checkpoint_dir(dir.path(), set.views);
  write_raw(dir / "config.json", "{}");  // not a weight file: must survive
  write_checkpoint_dir(dir.path(), set.views, 40);
  std::vector<std::string> expected = kThreeShardFiles;
  expected.insert(expected.begin(), "config.json");
  CHECK(entries(dir.path()) == expected);  // the stale model.safetensors would shadow the index

  write_checkpoint_dir(dir.path(), set.views, 48);  // 2 shards now: the 3-shard files go
  CHECK(entries(dir.path()) == std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                                        "model-00002-of-00002.safetensors",
                                                        "model.safetensors.index.json"});
  require_same_tensors(CheckpointDir::open(dir.path()), set);

  write_checkpoint_dir(dir.path(), set.views);
  CHECK(entries(dir.path()) == std::vector<std::string>{"config.json", "model.safetensors"});
}

TEST_CASE("checkpoint_dir: rejects broken directories and indexes", "[io]") {
  TempDir dir;
  const TensorSet set = five_tensors();
  const fs::path index_path = dir / "model.safetensors.index.json";

  SECTION("no weights at all") {
    require_open_fails(dir.path(), {dir.path().string(), "model.safetensors", "model.safetensors.index.json"});
  }
  SECTION("directory does not exist") {
    require_open_fails(dir / "absent", {(dir / "absent").string(), "model.safetensors.index.json"});
  }
  SECTION("index points at a missing shard") {
    write_checkpoint_dir(dir.path(), set.views, 40);
    fs::remove(dir / kThreeShardFiles[1]);
    require_open_fails(dir.path(), {index_path.string(), "'model-00002-of-00003.safetensors'", "does not exist"});
  }
  SECTION("index names a tensor its shard lacks") {
    write_checkpoint_dir(dir.path(), set.views, 40);
    json index = json::parse(read_raw(index_path));
    index["weight_map"]["ghost.weight"] = kThreeShardFiles[0];
    write_raw(index_path, index.dump());
    require_open_fails(
        dir.path(), {index_path.string(), "'ghost.weight'", "'model-00001-of-00003.safetensors'", "no tensor named"});
  }
  SECTION("a tensor in two shards") {
    write_checkpoint_dir(dir.path(), set.views, 40);
    write_safetensors(dir / "extra.safetensors", std::span(set.views).first(1));  // repeats layers.0.weight
    json index = json::parse(read_raw(index_path));
    index["weight_map"]["layers.0.weight"] = "extra.safetensors";
    write_raw(index_path, index.dump());
    require_open_fails(dir.path(),
                       {"'layers.0.weight'", "extra.safetensors", kThreeShardFiles[0], "exactly one shard"});
  }
  SECTION("index is not JSON") {
    write_raw(index_path, "{\"weight_map\":");
    require_open_fails(dir.path(), {index_path.string(), "not valid JSON"});
  }
  SECTION("index lacks weight_map") {
    write_raw(index_path, R"({"metadata":{"total_size":0}})");
    require_open_fails(dir.path(), {index_path.string(), "\"weight_map\""});
  }
  SECTION("weight_map value is not a plain file name") {
    write_raw(index_path, R"({"weight_map":{"a":"../elsewhere.safetensors"}})");
    require_open_fails(dir.path(), {"tensor 'a'", "\"../elsewhere.safetensors\"", "plain file name"});
    write_raw(index_path, R"({"weight_map":{"a":3}})");
    require_open_fails(dir.path(), {"tensor 'a'", "to 3"});
  }
  SECTION("a corrupt shard is reported with its own path") {
    write_checkpoint_dir(dir.path(), set.views, 40);
    write_raw(dir / kThreeShardFiles[2], "short");
    require_open_fails(dir.path(), {(dir / kThreeShardFiles[2]).string(), "at least 8"});
  }
}

TEST_CASE("checkpoint_dir: a failed write removes what it wrote", "[io]") {
  TempDir dir;
  TensorSet set = five_tensors();
  const std::vector<std::byte> wrong_size(10);
  set.views[3].data = wrong_size;  // fails in the second shard, after the first was written

  SECTION("into a new directory: the directory goes too") {
    const fs::path model_dir = dir / "model";
    CHECK_THROWS_WITH(write_checkpoint_dir(model_dir, set.views, 40),
                      Contains("layers.3.weight") && Contains("needs 16 bytes but 10"));
    CHECK_FALSE(fs::exists(model_dir));
  }
  SECTION("into an existing directory: other files stay") {
    write_raw(dir / "config.json", "{}");
    CHECK_THROWS_AS(write_checkpoint_dir(dir.path(), set.views, 40), tessera::FormatError);
    CHECK(entries(dir.path()) == std::vector<std::string>{"config.json"});
  }
  SECTION("a name repeated across shards fails before anything is written") {
    TensorSet repeated = five_tensors();
    repeated.views[4].name = repeated.views[0].name;
    CHECK_THROWS_WITH(write_checkpoint_dir(dir / "model", repeated.views, 40),
                      Contains("'layers.0.weight'") && Contains("twice"));
    CHECK(entries(dir.path()).empty());
  }
  SECTION("the directory path is a regular file") {
    write_raw(dir / "model", "a file");
    CHECK_THROWS_WITH(write_checkpoint_dir(dir / "model", five_tensors().views),
                      Contains((dir / "model").string()) && Contains("cannot create"));
    CHECK(read_raw(dir / "model") == "a file");
  }
}
