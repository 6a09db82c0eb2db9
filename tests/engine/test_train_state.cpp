// engine/train_state.hpp: a checkpoint written and read back bit for bit; parts read across their boundaries with
// padding zeroed; local tensors by shard position; keep_last by the manifests' steps; leftovers of a killed write;
// damaged checkpoints (a flipped byte, a missing, doubled or resized tensor, a manifest field of the wrong type or
// range) refused with the file and the field named; the settings' first difference named.
#include <ATen/ATen.h>  // before Catch: glog's CHECK must not replace Catch's (as with the PCH)
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "tessera/core/crc32c.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/engine/train_state.hpp"
#include "tessera/io/safetensors.hpp"
#include "tessera/optim/adam8bit.hpp"
#include "tessera/optim/adamw.hpp"
#include "tessera/optim/sgd.hpp"
#include "scratch_dir.hpp"

using namespace tessera;
using testing::Cleanup;
using testing::fresh_dir;
namespace fs = std::filesystem;

namespace {

// The fields the trainer adds to a manifest (engine/trainer_state.hpp, optimizer_step.hpp).
nlohmann::json trainer_fields(bool has_state = false) {
  return {{"experiment", {{"family", "llama"}}},
          {"settings", {{"seq_len", 16}}},
          {"world_size", 1},
          {"shard_group_size", 1},
          {"units", 2},
          {"optimizer", {{"name", "adamw"}, {"has_state", has_state}, {"steps", 0}}},
          {"loss_scaler", {{"scale", 65536.0}, {"good_in_a_row", 0}, {"skipped", 0}, {"growths", 0}}}};
}

// Saves one step of a one-rank job holding `w`, with the trainer's fields in the manifest.
train_state::Saved save_one(const fs::path& dir, std::int64_t step, const TrainStateWriter& w, std::int64_t keep_last = 0,
                            bool has_state = false) {
  return train_state::save(dir, step, w, true, trainer_fields(has_state), dist::AnyCommunicator(),
                           c10::Device(c10::kCPU), keep_last);
}

nlohmann::json read_manifest(const fs::path& ckpt) {
  return nlohmann::json::parse(std::ifstream(ckpt / "manifest.json"));
}
void write_manifest(const fs::path& ckpt, const nlohmann::json& m) { std::ofstream(ckpt / "manifest.json") << m.dump(1); }

// Writes `file` in the checkpoint with `tensors` (name, contiguous CPU tensor, placement as the metadata says it:
// "part <begin> <numel>" or "local <group rank>") and lists it in the manifest with its size and CRC-32C, as
// another rank's save would have.
struct Placed {
  std::string name;
  at::Tensor tensor;
  std::string placement;
};
void add_rank_file(const fs::path& ckpt, const std::string& file, const std::vector<Placed>& tensors) {
  std::vector<io::TensorView> views;
  std::map<std::string, std::string> metadata{{"format", "tessera train state"}};
  for (const Placed& t : tensors) {
    views.push_back(tensor_view(t.name, t.tensor));
    metadata[t.name] = t.placement;
  }
  io::write_safetensors(ckpt / file, views, metadata);
  std::ifstream in(ckpt / file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json m = read_manifest(ckpt);
  m["files"].push_back({{"name", file}, {"bytes", bytes.size()}, {"crc32c", crc32c_hex(crc32c(bytes))}});
  write_manifest(ckpt, m);
}

// XORs one byte of `file` at `offset` (from the end when negative).
void flip_byte(const fs::path& file, std::int64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto size = static_cast<std::int64_t>(fs::file_size(file));
  f.seekg(offset < 0 ? size + offset : offset);
  char c = 0;
  f.get(c);
  f.seekp(offset < 0 ? size + offset : offset);
  f.put(static_cast<char>(c ^ 0x01));
}

// A scratch directory (removed with the test) holding step 2 of a one-rank job whose "0.param" is 0, 1, .., 99.
struct OneCheckpoint {
  fs::path dir = fresh_dir("train_state");
  Cleanup cleanup{dir};
  fs::path ckpt = [this] {
    TrainStateWriter w;
    w.add_part("0.param", at::arange(100, at::kFloat), 0, 100);
    return save_one(dir / "c", 2, w).path;
  }();
};

}  // namespace

TEST_CASE("train_state: parts and local tensors come back bit for bit", "[engine][train_state]") {
  const fs::path tmp_dir = fresh_dir("train_state");
  const Cleanup cleanup{tmp_dir};
  const at::Tensor a = at::randn({10});
  const at::Tensor b = at::randn({7}).to(at::kBFloat16);
  const at::Tensor codes = at::randint(0, 255, {12}, at::TensorOptions().dtype(at::kByte));
  TrainStateWriter w(3);
  w.add_part("0.param", a, 0, 10);
  w.add_part("1.param", at::cat({b, at::zeros({1}, b.options())}), 0, 7);  // padded to 8: the pad is not kept
  w.add_local("1.m_codes", codes);
  const train_state::Saved saved = save_one(tmp_dir / "ckpt", 4, w, 0, /*has_state=*/true);
  CHECK(saved.path.filename() == "step-00000004");
  CHECK(saved.bytes > 0);

  const TrainStateReader r(saved.path);
  CHECK(r.step() == 4);
  at::Tensor back = at::full({6}, 9.0f);
  r.read_part("0.param", back, 0, 10);
  CHECK(at::equal(back, a.narrow(0, 0, 6)));
  at::Tensor middle = at::empty({3});
  r.read_part("0.param", middle, 2, 10);  // from inside the part
  CHECK(at::equal(middle, a.narrow(0, 2, 3)));
  at::Tensor padded = at::full({8}, 5.0f, at::TensorOptions().dtype(at::kBFloat16));
  r.read_part("1.param", padded, 0, 7);  // the eighth element is past the tensor: zero
  CHECK(at::equal(padded.narrow(0, 0, 7), b));
  CHECK(padded[7].item<float>() == 0.0f);
  at::Tensor codes_back = at::empty({12}, at::TensorOptions().dtype(at::kByte));
  r.read_local("1.m_codes", codes_back, 3);
  CHECK(at::equal(codes_back, codes));
  at::Tensor none = at::full({4}, 3.0f);
  r.read_part("2.param", none, 0, 0);  // a tensor of no elements is all padding: zeros, from no file
  CHECK(at::equal(none, at::zeros({4})));

  at::Tensor wrong_dtype = at::empty({6}, at::TensorOptions().dtype(at::kDouble));
  CHECK_THROWS_WITH(r.read_part("0.param", wrong_dtype, 0, 10), Catch::Contains("was written in F32"));
  CHECK_THROWS_WITH(r.read_local("1.m_codes", codes_back, 0), Catch::Contains("no '1.m_codes' for shard position 0"));
  // What the run needs and the checkpoint lacks, or holds in another size: never zeros.
  CHECK_THROWS_WITH(r.read_part("0.exp_avg", back, 0, 10),
                    Catch::Contains("has no tensor '0.exp_avg' (10 elements), which this run needs"));
  CHECK_THROWS_WITH(r.read_part("0.param", back, 0, 12),
                    Catch::Contains("'0.param' holds 10 elements and this run's has 12"));
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

TEST_CASE("train_state: keep_last and newest go by the manifests' steps and keep what was just written",
          "[engine][train_state]") {
  const fs::path tmp_dir = fresh_dir("train_state");
  const Cleanup cleanup{tmp_dir};
  const fs::path dir = tmp_dir / "c";
  TrainStateWriter w;
  w.add_part("0.param", at::ones({4}), 0, 4);
  // A directory named ahead of its manifest (renamed, or copied in from elsewhere): step 2 called step 9.
  save_one(dir, 2, w);
  fs::rename(dir / "step-00000002", dir / "step-00000009");
  CHECK(train_state::newest(dir) == dir / "step-00000009");
  save_one(dir, 4, w, /*keep_last=*/1);  // once: kept step-00000009 and deleted step 4, just written
  CHECK(fs::exists(dir / "step-00000004/manifest.json"));
  CHECK(!fs::exists(dir / "step-00000009"));
  CHECK(train_state::newest(dir) == dir / "step-00000004");
  // A later checkpoint from an earlier, longer run stays newest; the one just written is never the one deleted.
  save_one(dir, 10, w);
  save_one(dir, 5, w, /*keep_last=*/1);
  CHECK(fs::exists(dir / "step-00000005/manifest.json"));
  CHECK(fs::exists(dir / "step-00000010/manifest.json"));
  CHECK(!fs::exists(dir / "step-00000004"));
  CHECK(train_state::newest(dir) == dir / "step-00000010");
  // An unreadable manifest counts by its directory's name: resuming it is refused, never silently skipped.
  std::ofstream(dir / "step-00000010/manifest.json") << "{";
  CHECK(train_state::newest(dir) == dir / "step-00000010");
}

TEST_CASE("train_state: a changed byte in a rank file is refused by its CRC-32C", "[engine][train_state]") {
  const OneCheckpoint one;
  const fs::path& ckpt = one.ckpt;
  const fs::path file = ckpt / "rank-00000.safetensors";
  const nlohmann::json listed = read_manifest(ckpt)["files"][0];
  CHECK(listed["crc32c"].get<std::string>().size() == 8);
  at::Tensor back = at::empty({100});
  SECTION("in the tensor data: refused when the data is first read") {
    flip_byte(file, -3);
    const TrainStateReader r(ckpt);
    CHECK_THROWS_WITH(r.read_part("0.param", back, 0, 100),
                      Catch::Contains("rank-00000.safetensors: its CRC-32C is") &&
                          Catch::Contains("and the manifest says " + listed["crc32c"].get<std::string>()) &&
                          Catch::Contains("resume from an older one"));
  }
  SECTION("in the header: the checksum is named, not the header's parse error") {
    flip_byte(file, 20);
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("rank-00000.safetensors: its CRC-32C is"));
  }
  SECTION("intact: read") {
    const TrainStateReader r(ckpt);
    r.read_part("0.param", back, 0, 100);
    CHECK(at::equal(back, at::arange(100, at::kFloat)));
  }
}

TEST_CASE("train_state: every element of a part tensor is in exactly one file", "[engine][train_state]") {
  const fs::path tmp_dir = fresh_dir("train_state");
  const Cleanup cleanup{tmp_dir};
  const at::Tensor a = at::arange(10, at::kFloat);
  TrainStateWriter w;
  w.add_part("0.param", a.narrow(0, 0, 6), 0, 10);  // rank 0: elements 0..5 of 10
  w.add_local("0.m_codes", at::ones({4}, at::kByte));
  const fs::path ckpt = save_one(tmp_dir / "c", 2, w, 0, /*has_state=*/true).path;
  SECTION("the rest in another rank's file: read across both") {
    add_rank_file(ckpt, "rank-00001.safetensors", {{"0.param", a.narrow(0, 6, 4).contiguous(), "part 6 10"}});
    at::Tensor back = at::empty({10});
    TrainStateReader(ckpt).read_part("0.param", back, 0, 10);
    CHECK(at::equal(back, a));
  }
  SECTION("elements no file holds") {
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("elements [6, 10) of '0.param' are in no rank file"));
  }
  SECTION("elements two files hold") {
    add_rank_file(ckpt, "rank-00001.safetensors", {{"0.param", a.narrow(0, 4, 6).contiguous(), "part 4 10"}});
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("rank-00001.safetensors: elements from 4 of '0.param' "
                                                              "are in another rank file too"));
  }
  SECTION("parts that disagree on the tensor's size") {
    add_rank_file(ckpt, "rank-00001.safetensors", {{"0.param", a.narrow(0, 6, 4).contiguous(), "part 6 11"}});
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("the parts of '0.param' disagree on its size"));
  }
  SECTION("a local tensor twice") {
    add_rank_file(ckpt, "rank-00001.safetensors", {{"0.param", a.narrow(0, 6, 4).contiguous(), "part 6 10"},
                                                   {"0.m_codes", at::ones({4}, at::kByte), "local 0"}});
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("local tensor '0.m_codes' of shard position 0 is in "
                                                              "another rank file too"));
  }
  SECTION("the optimizer's state beside \"has_state\": false") {
    add_rank_file(ckpt, "rank-00001.safetensors", {{"0.param", a.narrow(0, 6, 4).contiguous(), "part 6 10"}});
    nlohmann::json m = read_manifest(ckpt);
    m["optimizer"]["has_state"] = false;
    write_manifest(ckpt, m);
    CHECK_THROWS_WITH(TrainStateReader(ckpt), Catch::Contains("rank-00000.safetensors: holds the optimizer's state "
                                                              "'0.m_codes' and the manifest's \"optimizer.has_state\" "
                                                              "is false"));
  }
}

TEST_CASE("train_state: damaged checkpoints are refused, naming the file", "[engine][train_state]") {
  const OneCheckpoint one;
  const fs::path& ckpt = one.ckpt;
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
}

TEST_CASE("train_state: every manifest field is checked for its type and range, by name", "[engine][train_state]") {
  const OneCheckpoint one;
  const fs::path& ckpt = one.ckpt;
  const nlohmann::json good = read_manifest(ckpt);
  CHECK(train_state::check_manifest(good, "m.json") == 2);
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json m = good;
    edit(m);
    try {
      train_state::check_manifest(m, "m.json");
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  using Catch::Contains;
  CHECK_THAT(refused([](auto& m) { m["version"] = 99; }), Contains("m.json: checkpoint format version 99, and this "
                                                                    "tessera reads version 2"));
  CHECK_THAT(refused([](auto& m) { m["version"] = (1ull << 32) + 2; }), Contains("format version 4294967298"));
  CHECK_THAT(refused([](auto& m) { m["version"] = 1; }), Contains("format version 1,"));
  CHECK_THAT(refused([](auto& m) { m["format"] = 1; }),
             Contains("m.json: \"format\" must be \"tessera train state\", got a number 1; this checkpoint is damaged"));
  CHECK_THAT(refused([](auto& m) { m["step"] = -1; }), Contains("\"step\" must be a whole number >= 0, got a number -1"));
  CHECK_THAT(refused([](auto& m) { m["step"] = 2.5; }), Contains("\"step\" must be a whole number >= 0, got a number 2.5"));
  CHECK_THAT(refused([](auto& m) { m["step"] = 18446744073709551615ull; }), Contains("\"step\" must be a whole number"));
  CHECK_THAT(refused([](auto& m) { m["shard_group_size"] = "2"; }),
             Contains("\"shard_group_size\" must be a whole number from 1 to world_size (1), got a string \"2\""));
  CHECK_THAT(refused([](auto& m) {
               m["world_size"] = 4;
               m["shard_group_size"] = 3;
             }),
             Contains("\"shard_group_size\" is 3, which does not divide world_size 4"));
  CHECK_THAT(refused([](auto& m) { m.erase("units"); }), Contains("\"units\" must be a whole number >= 1, is missing"));
  CHECK_THAT(refused([](auto& m) { m["settings"] = nullptr; }), Contains("\"settings\" must be an object, got null"));
  CHECK_THAT(refused([](auto& m) { m.erase("optimizer"); }), Contains("\"optimizer\" must be an object, is missing"));
  CHECK_THAT(refused([](auto& m) { m["optimizer"]["has_state"] = "yes"; }),
             Contains("\"optimizer.has_state\" must be true or false, got a string \"yes\""));
  CHECK_THAT(refused([](auto& m) { m["optimizer"]["steps"] = -5; }),
             Contains("\"optimizer.steps\" must be a whole number from 0 to the checkpoint's step, 2, got a number -5"));
  CHECK_THAT(refused([](auto& m) { m["optimizer"]["steps"] = 3; }), Contains("\"optimizer.steps\" must be"));
  CHECK_THAT(refused([](auto& m) { m["optimizer"]["name"] = 7; }), Contains("\"optimizer.name\" must be a string"));
  CHECK_THAT(refused([](auto& m) { m["loss_scaler"]["scale"] = 0; }),
             Contains("\"loss_scaler.scale\" must be a finite number > 0, got a number 0"));
  CHECK_THAT(refused([](auto& m) { m["loss_scaler"]["skipped"] = 9; }), Contains("\"loss_scaler.skipped\" must be"));
  CHECK_THAT(refused([](auto& m) { m["files"] = nlohmann::json::array(); }),
             Contains("\"files\" must be a non-empty array"));
  CHECK_THAT(refused([](auto& m) { m["files"][0]["name"] = "../x"; }),
             Contains("\"files[0].name\" is \"../x\", which is not a plain file name"));
  CHECK_THAT(refused([](auto& m) { m["files"].push_back(m["files"][0]); }),
             Contains("\"files[1].name\" lists rank-00000.safetensors a second time"));
  CHECK_THAT(refused([](auto& m) { m["files"][0]["bytes"] = "1"; }), Contains("\"files[0].bytes\" must be a whole number"));
  CHECK_THAT(refused([](auto& m) { m["files"][0].erase("crc32c"); }),
             Contains("\"files[0].crc32c\" must be the file's CRC-32C as 8 lowercase hex digits, is missing"));
  CHECK_THAT(refused([](auto& m) { m["files"][0]["crc32c"] = "XYZ"; }), Contains("\"files[0].crc32c\" must be"));
  CHECK_THAT(refused([](auto& m) { m = nlohmann::json::array(); }), Contains("m.json: must be a JSON object, got an array"));
  // The reader applies it to the file.
  write_manifest(ckpt, [&] { nlohmann::json m = good; m["optimizer"]["steps"] = -5; return m; }());
  CHECK_THROWS_WITH(TrainStateReader(ckpt), Contains("manifest.json: \"optimizer.steps\" must be a whole number"));
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
