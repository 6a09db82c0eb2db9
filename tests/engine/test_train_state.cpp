// engine/train_state.hpp: a checkpoint written and read back bit for bit; parts read across their boundaries with
// padding zeroed; local tensors by shard position; keep_last; leftovers of a killed write; damaged checkpoints
// refused with the file named; the settings' first difference named.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "tessera/core/error.hpp"
#include "tessera/engine/train_state.hpp"
#include "tessera/optim/adam8bit.hpp"
#include "tessera/optim/adamw.hpp"
#include "tessera/optim/sgd.hpp"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

// An empty directory of this process's own under the system temp dir.
fs::path fresh_dir(const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct Cleanup {
  fs::path dir;
  ~Cleanup() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

// Saves one step of a one-rank job holding `w`, with an empty manifest but the step.
train_state::Saved save_one(const fs::path& dir, std::int64_t step, const TrainStateWriter& w, std::int64_t keep_last = 0) {
  return train_state::save(dir, step, w, true, nlohmann::json::object(), dist::AnyCommunicator(),
                           c10::Device(c10::kCPU), keep_last);
}

}  // namespace

TEST_CASE("train_state: parts and local tensors come back bit for bit", "[engine][train_state]") {
  const fs::path tmp_dir = fresh_dir("train_state");
  const Cleanup cleanup{tmp_dir};
  const at::Tensor a = at::randn({10});
  const at::Tensor b = at::randn({7}).to(at::kBFloat16);
  const at::Tensor codes = at::randint(0, 255, {12}, at::TensorOptions().dtype(at::kByte));
  TrainStateWriter w(3);
  w.add_part("0.param", a.narrow(0, 0, 6), 0, 10);  // elements 0..5 of a tensor of 10
  w.add_part("0.param2", a.narrow(0, 6, 4), 6, 10);  // another name: a different tensor
  w.add_part("1.param", at::cat({b, at::zeros({1}, b.options())}), 0, 7);  // padded to 8: the pad is not kept
  w.add_local("1.m_codes", codes);
  const train_state::Saved saved = save_one(tmp_dir / "ckpt", 4, w);
  CHECK(saved.path.filename() == "step-00000004");
  CHECK(saved.bytes > 0);

  const TrainStateReader r(saved.path);
  CHECK(r.step() == 4);
  at::Tensor back = at::full({6}, 9.0f);
  r.read_part("0.param", back, 0);
  CHECK(at::equal(back, a.narrow(0, 0, 6)));
  at::Tensor middle = at::empty({3});
  r.read_part("0.param", middle, 2);  // from inside the part
  CHECK(at::equal(middle, a.narrow(0, 2, 3)));
  at::Tensor padded = at::full({8}, 5.0f, at::TensorOptions().dtype(at::kBFloat16));
  r.read_part("1.param", padded, 0);  // the eighth element is past the tensor: zero
  CHECK(at::equal(padded.narrow(0, 0, 7), b));
  CHECK(padded[7].item<float>() == 0.0f);
  at::Tensor codes_back = at::empty({12}, at::TensorOptions().dtype(at::kByte));
  r.read_local("1.m_codes", codes_back, 3);
  CHECK(at::equal(codes_back, codes));

  at::Tensor beyond = at::empty({6});
  CHECK_THROWS_WITH(r.read_part("0.param", beyond, 4), Catch::Contains("holds 2 of the 6 elements of '0.param'"));
  at::Tensor wrong_dtype = at::empty({6}, at::TensorOptions().dtype(at::kDouble));
  CHECK_THROWS_WITH(r.read_part("0.param", wrong_dtype, 0), Catch::Contains("was written in F32"));
  CHECK_THROWS_WITH(r.read_local("1.m_codes", codes_back, 0), Catch::Contains("no '1.m_codes' for shard position 0"));
}

TEST_CASE("train_state: keep_last, newest, and what a killed write leaves", "[engine][train_state]") {
  const fs::path tmp_dir = fresh_dir("train_state");
  const Cleanup cleanup{tmp_dir};
  const fs::path dir = tmp_dir / "c";
  TrainStateWriter w;
  w.add_part("0.param", at::ones({4}), 0, 4);
  fs::create_directories(dir / "step-00000009.partial-1");      // a write killed before its manifest
  fs::create_directories(dir / "step-00000008");                // no manifest: not a checkpoint
  for (std::int64_t step : {1, 2, 3}) save_one(dir, step, w, /*keep_last=*/2);
  CHECK(!fs::exists(dir / "step-00000001"));
  CHECK(fs::exists(dir / "step-00000002/manifest.json"));
  CHECK(!fs::exists(dir / "step-00000009.partial-1"));  // the next write removed the leftover
  CHECK(train_state::newest(dir) == dir / "step-00000003");
  CHECK(!train_state::newest(tmp_dir / "nothing-here"));
  save_one(dir, 3, w);  // the same step again replaces it
  CHECK(train_state::newest(dir) == dir / "step-00000003");
}

TEST_CASE("train_state: damaged checkpoints are refused, naming the file", "[engine][train_state]") {
  const fs::path tmp_dir = fresh_dir("train_state");
  const Cleanup cleanup{tmp_dir};
  TrainStateWriter w;
  w.add_part("0.param", at::arange(100, at::kFloat), 0, 100);
  const fs::path ckpt = save_one(tmp_dir / "c", 2, w).path;
  const fs::path file = ckpt / "rank-00000.safetensors";
  SECTION("truncated rank file") {
    fs::resize_file(file, 50);
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("rank-00000.safetensors: holds 50 bytes and the manifest "
                                                              "says") && Catch::Contains("damaged"));
  }
  SECTION("missing rank file") {
    fs::remove(file);
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("missing (the manifest lists it)"));
  }
  SECTION("no manifest") {
    fs::remove(ckpt / "manifest.json");
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("no manifest.json"));
  }
  SECTION("another format version") {
    std::ofstream(ckpt / "manifest.json") << R"({"format": "tessera train state", "version": 99, "step": 2, "files": []})";
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("format version 99"));
  }
  SECTION("a file name that leaves the directory") {
    std::ofstream(ckpt / "manifest.json")
        << R"({"format": "tessera train state", "version": 1, "step": 2, "files": [{"name": "../x", "bytes": 1}]})";
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("is not a plain file name"));
  }
  SECTION("fields of another type are named, never a JSON type error") {
    std::ofstream(ckpt / "manifest.json") << R"({"format": 1, "version": 1, "step": 2, "files": []})";
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("\"format\" is missing or malformed"));
    std::ofstream(ckpt / "manifest.json")
        << R"({"format": "tessera train state", "version": 1, "step": 2, "files": [], "shard_group_size": "2"})";
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("\"shard_group_size\" is missing or malformed"));
  }
}

TEST_CASE("train_state: the first difference of experiment or settings is named", "[engine][train_state]") {
  const nlohmann::json ckpt = {{"experiment", {{"family", "llama"}, {"precision", "32-true"}}},
                               {"settings", {{"seq_len", 32}, {"seed", 42}}}};
  CHECK(!train_state::difference(ckpt, ckpt));
  nlohmann::json run = ckpt;
  run["settings"]["seq_len"] = 64;
  CHECK(train_state::difference(ckpt, run) == "seq_len: the checkpoint has 32, this run has 64");
  run["experiment"]["precision"] = "bf16-mixed";
  CHECK(train_state::difference(ckpt, run) == "precision: the checkpoint has \"32-true\", this run has \"bf16-mixed\"");
}

TEST_CASE("train_state: the optimizers list their state", "[engine][train_state]") {
  STATIC_REQUIRE(CheckpointableOptimizer<AdamW>);
  STATIC_REQUIRE(CheckpointableOptimizer<Sgd>);
  STATIC_REQUIRE(CheckpointableOptimizer<Adam8bit>);
  AdamW::State adam = AdamW::init(at::zeros({8}), at::kFloat);
  const auto tensors = AdamW::state_tensors(adam);
  REQUIRE(tensors.size() == 2);
  CHECK((tensors[0].per_element && tensors[0].tensor.is_same(adam.exp_avg)));  // the state itself: restored in place
  Adam8bit::State a8 = Adam8bit::init(at::zeros({8192}), at::kFloat);
  for (const StateTensor& t : Adam8bit::state_tensors(a8)) CHECK(!t.per_element);
}
