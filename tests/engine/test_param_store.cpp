// tests: engine/param_store.hpp: what a checkpoint must be before anything is allocated for it, non-finite
// weights refused at load, and an allocation failure that names the bytes.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/io/checkpoint_dir.hpp"

using namespace tessera;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const std::vector<ParamSpec> kSpecs{{"a.weight", {2, 3}, 0, ParamInit::normal}, {"b.weight", {4}, 1, ParamInit::ones}};

// A checkpoint directory holding `tensors` (name, tensor) as model.safetensors.
fs::path write_checkpoint(const fs::path& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::vector<io::TensorView> views;
  for (const auto& [name, t] : tensors) views.push_back(tensor_view(name, t));
  io::write_checkpoint_dir(dir, views);
  return dir;
}


}  // namespace

TEST_CASE("check_loadable reads headers only and refuses what cannot be a parameter", "[engine]") {
  const fs::path dir = tessera::testing::fresh_dir("store");
  const at::Tensor b = at::ones({4});
  write_checkpoint(dir / "ok", {{"a.weight", at::randn({2, 3})}, {"b.weight", b}});
  CHECK_NOTHROW(ParamStore::check_loadable(kSpecs, io::CheckpointDir::open(dir / "ok")));

  write_checkpoint(dir / "shape", {{"a.weight", at::randn({3, 2})}, {"b.weight", b}});
  CHECK_THROWS_WITH(ParamStore::check_loadable(kSpecs, io::CheckpointDir::open(dir / "shape")),
                    Contains("tensor 'a.weight' has shape [3, 2] but config.json implies [2, 3]"));

  write_checkpoint(dir / "ints", {{"a.weight", at::ones({2, 3}, at::kInt)}, {"b.weight", b}});
  CHECK_THROWS_WITH(ParamStore::check_loadable(kSpecs, io::CheckpointDir::open(dir / "ints")),
                    Contains((dir / "ints").string()) && Contains("tensor 'a.weight' has dtype I32") &&
                        Contains("F32, BF16, F16 or F64"));
  write_checkpoint(dir / "bools", {{"a.weight", at::ones({2, 3}, at::kBool)}, {"b.weight", b}});
  CHECK_THROWS_WITH(ParamStore::check_loadable(kSpecs, io::CheckpointDir::open(dir / "bools")), Contains("dtype BOOL"));
  fs::remove_all(dir);
}

TEST_CASE("load refuses NaN and Inf weights, naming the tensor and the count", "[engine]") {
  const fs::path dir = tessera::testing::fresh_dir("store");
  at::Tensor a = at::randn({2, 3});
  a[0][1] = std::numeric_limits<float>::quiet_NaN();
  a[1][2] = std::numeric_limits<float>::infinity();
  write_checkpoint(dir / "nan", {{"a.weight", a.to(at::kBFloat16)}, {"b.weight", at::ones({4})}});
  ParamStore store(kSpecs, c10::ScalarType::Float, c10::Device(c10::kCPU));
  CHECK_THROWS_WITH(store.load(io::CheckpointDir::open(dir / "nan")),
                    Contains("tensor 'a.weight' holds 2 NaN or Inf value(s)"));
  fs::remove_all(dir);
}

TEST_CASE("a store too large for memory names the bytes it asked for", "[engine]") {
  // 2^42 fp32 elements (16 TiB): no machine here has it, so the allocation fails at once.
  const std::vector<ParamSpec> huge{{"w", {1ll << 21, 1ll << 21}, 0, ParamInit::normal}};
  CHECK_THROWS_WITH(ParamStore(huge, c10::ScalarType::Float, c10::Device(c10::kCPU)),
                    Contains("out of memory on cpu: cannot allocate 17592186044416 bytes for unit 0") &&
                        Contains("FullShard"));
}
