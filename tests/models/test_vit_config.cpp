// ViT presets carry the published shapes: their parameter counts are checked without building weights. The unit
// layout, config.json in and out, and a forward pass on plain tensors.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "tessera/core/error.hpp"
#include "tessera/models/direct_runner.hpp"
#include "tessera/models/vit.hpp"
#include "models/random_units.hpp"

using namespace tessera;
using namespace tessera::models;

static_assert(ModelFamily<Vit>, "Vit must satisfy the family concept that Experiment<> checks");

namespace {

VitConfig small() {
  VitConfig c = vit_preset("tiny");
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.image_size = 16;
  c.patch_size = 4;
  c.num_labels = 7;
  return c;
}

}  // namespace

TEST_CASE("ViT presets have their published parameter counts", "[models][vit]") {
  // sum(p.numel() for p in ViTForImageClassification(ViTConfig(...)).parameters()) with the model built under
  // `with torch.device("meta")` (transformers 5.17; no weights allocated), for each preset's shape keys.
  // vit-base-patch16-224 agrees with google/vit-base-patch16-224 on the Hugging Face hub (86.6M).
  CHECK(vit_preset("tiny").parameter_count() == 3'191'562);
  CHECK(vit_preset("vit-base-patch16-224").parameter_count() == 86'567'656);
  CHECK(vit_preset("vit-large-patch16-224").parameter_count() == 304'326'632);
  CHECK(vit_preset("vit-huge-patch14-224").parameter_count() == 632'045'800);
  CHECK(vit_preset("vit-base-patch16-224").seq_len() == 197);
  CHECK(vit_preset("vit-huge-patch14-224").seq_len() == 257);
}

TEST_CASE("ViT: the parameter list agrees with the count, uses Hugging Face names and fills valid units",
          "[models][vit]") {
  std::vector<VitConfig> configs{small()};
  for (auto name : vit_preset_names()) configs.push_back(vit_preset(name));
  for (const VitConfig& c : configs) {
    const auto specs = Vit::parameters(c);
    const auto units = Vit::units(c);
    const auto calls = Vit::calls(c);
    std::int64_t n = 0;
    std::vector<std::int64_t> per_unit(units.size(), 0);
    for (const auto& spec : specs) {
      n += spec.numel();
      REQUIRE(spec.unit < units.size());
      per_unit[spec.unit] += spec.numel();
    }
    CHECK(n == c.parameter_count());
    REQUIRE(calls.size() == units.size());
    for (std::size_t u = 0; u < units.size(); ++u) {
      CHECK(per_unit[u] > 0);
      CHECK(calls[u].units == std::vector<std::size_t>{u});
    }
    CHECK(units.size() == static_cast<std::size_t>(c.num_hidden_layers) + 2);
    CHECK(units[1].block_type == "ViTLayer");
    CHECK(units[1].module == "vit.encoder.layer.0");
    CHECK(!units[0].is_block());
    CHECK(!units.back().is_block());
  }
  const auto specs = Vit::parameters(vit_preset("vit-base-patch16-224"));
  CHECK(specs[0].name == "vit.embeddings.cls_token");
  CHECK(specs[1].shape == std::vector<std::int64_t>{1, 197, 768});
  CHECK(specs[2].shape == std::vector<std::int64_t>{768, 3, 16, 16});
  CHECK(!specs[2].linear);  // the patch convolution is no linear layer adapters could target
  CHECK(specs[4].name == "vit.encoder.layer.0.attention.attention.query.weight");
  CHECK(specs[4].linear);
  CHECK(specs.back().name == "classifier.bias");
  CHECK(specs[specs.size() - 2].shape == std::vector<std::int64_t>{1000, 768});
  const ImageSpec data = Vit::data_spec(vit_preset("vit-base-patch16-224"));
  CHECK(data.image_size == 224);
  CHECK(data.num_labels == 1000);
  CHECK(data.positions == 197);
  CHECK(data.mean[0] == 0.5);
  CHECK(data.resample == Resample::bilinear);
}

TEST_CASE("ViT forward on plain tensors: a finite loss near log(classes) and every gradient", "[models][vit]") {
  at::manual_seed(5);
  const VitConfig c = small();
  auto units = testing::random_units<Vit>(c);
  const auto ctx = Vit::make_context(c, 256, at::kFloat, c10::Device("cpu"));
  DirectRunner<Vit> run(c, ctx, units);
  const ImageBatch batch{at::randn({3, 3, 16, 16}), at::randint(c.num_labels, {3}, at::kLong)};
  const at::Tensor loss = Vit::forward(c, run, batch);
  CHECK(std::isfinite(loss.item<double>()));
  CHECK(std::abs(loss.item<double>() - std::log(7.0)) < 1.0);
  loss.backward();
  for (const auto& unit : units)
    for (const auto& p : unit) CHECK(p.grad().defined());
  // Images of another size are refused with the shape the model takes.
  const ImageBatch wrong{at::randn({3, 3, 32, 32}), batch.labels};
  CHECK_THROWS_WITH(Vit::forward(c, run, wrong), Catch::Contains("[3, 3, 32, 32]") && Catch::Contains("(B, 3, 16, 16)"));
}

TEST_CASE("ViT: unknown presets and bad config.json files are refused clearly", "[models][vit]") {
  CHECK_THROWS_WITH(vit_preset("vit-giant"), Catch::Contains("model=vit-giant") && Catch::Contains("vit-huge-patch14-224"));
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-vit-cfg-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "config.json").string();
  const std::string shape = R"("model_type":"vit","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
                                "intermediate_size":128,"image_size":32,"patch_size":8)";
  auto read_with = [&](const std::string& extra) {
    std::ofstream(dir / "config.json") << "{" << shape << (extra.empty() ? "" : ",") << extra << "}";
    return read_vit_config(dir / "config.json");
  };
  CHECK_THROWS_WITH(read_with(R"("hidden_act":"relu")"), Catch::Contains("\"hidden_act\" \"relu\" is not supported"));
  CHECK_THROWS_WITH(read_with(R"("qkv_bias":false)"), Catch::Contains("\"qkv_bias\": false is not supported"));
  CHECK_THROWS_WITH(read_with(R"("patch_size":7)"), Catch::Contains("image_size=32 is not a multiple of patch_size=7"));
  CHECK_THROWS_WITH(read_with(R"("num_labels":1)"), Catch::Contains("num_labels=1") && Catch::Contains("at least 2"));
  CHECK_THROWS_WITH(read_with(R"("id2label":{"0":"cat","2":"dog"})"), Catch::Contains("no name for id 1"));
  CHECK_THROWS_AS(read_with(R"("num_attention_heads":5)"), FormatError);

  // PretrainedConfig's default: 2 classes; id2label names them.
  CHECK(read_with("").num_labels == 2);
  const VitConfig named = read_with(R"("id2label":{"0":"cat","1":"dog","2":"bird"},"layer_norm_eps":1e-6)");
  CHECK(named.num_labels == 3);
  write_vit_config(dir / "config.json", named, "float32");
  const VitConfig back = read_vit_config(dir / "config.json");
  CHECK(back.parameter_count() == named.parameter_count());
  CHECK(back.labels == std::vector<std::string>{"cat", "dog", "bird"});
  CHECK(back.layer_norm_eps == 1e-6);
  CHECK(back.image_size == 32);
  std::filesystem::remove_all(dir);
}
