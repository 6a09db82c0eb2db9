// tessera::models::Blip2<Opt> and Blip2<T5> (models/blip2.hpp): the Hugging Face tensor names and shapes of every part
// (counted against the presets' published parameter counts without allocating a weight), the unit and call layout
// the engine relies on, config.json written and read back (and refused where tessera cannot compute it), and one
// training step of each tiny preset, with freeze= leaving the frozen parts without gradients or optimizer state.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/block_selection.hpp"
#include "tessera/tessera.hpp"

namespace fs = std::filesystem;
using namespace tessera;
using namespace tessera::models;
using tessera::testing::quiet;
using tessera::testing::small_run;

namespace {

template <class M>
std::map<std::string, std::vector<std::int64_t>> shapes(const typename M::Config& c) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const ParamSpec& s : M::parameters(c)) out[s.name] = s.shape;
  return out;
}

// Every spec's unit exists, every unit has specs, every call's units exist and every unit is read by a call.
template <class M>
void check_layout(const typename M::Config& c) {
  const auto specs = M::parameters(c);
  const auto units = M::units(c);
  const auto calls = M::calls(c);
  std::int64_t total = 0;
  std::set<std::string> names;
  std::vector<int> per_unit(units.size(), 0);
  for (const ParamSpec& s : specs) {
    REQUIRE(s.unit < units.size());
    ++per_unit[s.unit];
    total += s.numel();
    CHECK(names.insert(s.name).second);  // unique
  }
  CHECK(total == c.parameter_count());
  for (std::size_t u = 0; u < units.size(); ++u) CHECK(per_unit[u] > 0);
  std::vector<bool> read(units.size(), false);
  for (const CallInfo& call : calls)
    for (std::size_t u : call.units) {
      REQUIRE(u < units.size());
      read[u] = true;
    }
  for (std::size_t u = 0; u < units.size(); ++u) CHECK(read[u]);
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("tessera_test_blip2_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

static_assert(ModelFamily<Blip2Opt> && ModelFamily<Blip2T5>);

TEST_CASE("BLIP-2: every preset's tensors sum to its published parameter count, with Hugging Face's names",
          "[models][blip2]") {
  for (auto name : Blip2Opt::preset_names()) {
    INFO(name);
    check_layout<Blip2Opt>(Blip2Opt::preset(name));
  }
  for (auto name : Blip2T5::preset_names()) {
    INFO(name);
    check_layout<Blip2T5>(Blip2T5::preset(name));
  }
  const auto opt = shapes<Blip2Opt>(Blip2Opt::preset("blip2-opt-2.7b"));
  using V = std::vector<std::int64_t>;
  CHECK(opt.at("vision_model.embeddings.patch_embedding.weight") == V{1408, 3, 14, 14});
  CHECK(opt.at("vision_model.embeddings.position_embedding") == V{1, 257, 1408});
  CHECK(opt.at("vision_model.encoder.layers.38.self_attn.qkv.bias") == V{3 * 1408});
  CHECK(opt.at("query_tokens") == V{1, 32, 768});
  CHECK(opt.at("qformer.encoder.layer.0.crossattention.attention.key.weight") == V{768, 1408});
  CHECK(opt.count("qformer.encoder.layer.1.crossattention.attention.key.weight") == 0);  // every 2nd layer
  CHECK(opt.at("qformer.encoder.layer.11.output_query.LayerNorm.bias") == V{768});
  CHECK(opt.at("language_projection.weight") == V{2560, 768});
  CHECK(opt.at("language_model.model.decoder.layers.31.self_attn.q_proj.weight") == V{2560, 2560});
  CHECK(opt.count("language_model.lm_head.weight") == 0);  // tied to embed_tokens
  const auto t5 = Blip2T5::parameters(Blip2T5::preset("blip2-flan-t5-xl"));
  const auto shared = std::find_if(t5.begin(), t5.end(), [](const ParamSpec& s) { return s.name == "language_model.shared.weight"; });
  REQUIRE(shared != t5.end());
  CHECK(shared->aliases == std::vector<std::string>{"language_model.encoder.embed_tokens.weight",
                                                    "language_model.decoder.embed_tokens.weight"});
  CHECK(shapes<Blip2T5>(Blip2T5::preset("blip2-flan-t5-xl")).at("language_model.lm_head.weight") == V{32128, 2048});
}

TEST_CASE("BLIP-2: units carry the block types FSDP wraps and checkpointing counts", "[models][blip2]") {
  const auto units = Blip2Opt::units(Blip2Opt::preset("blip2-opt-2.7b"));
  std::map<std::string, int> types;
  for (const UnitInfo& u : units) ++types[u.block_type];
  CHECK(types["Blip2EncoderLayer"] == 39);
  CHECK(types["Blip2QFormerLayer"] == 12);
  CHECK(types["OPTDecoderLayer"] == 32);
  CHECK(units[40].module == "vision_model.post_layernorm");
  CHECK(units[41].module == "query_tokens");
  CHECK(units[42].module == "qformer.layernorm");
  CHECK(units[55].module == "language_projection");
  CHECK(units[56].module == "language_model.model.decoder.embed_tokens");
  const auto t5_units = Blip2T5::units(Blip2T5::preset("tiny"));
  CHECK(std::count_if(t5_units.begin(), t5_units.end(), [](const UnitInfo& u) { return u.block_type == "T5Block"; }) == 6);
}

TEST_CASE("BLIP-2: config.json round trip, and what tessera cannot compute is refused by key", "[models][blip2]") {
  const fs::path d = temp_dir("config");
  auto c = Blip2T5::preset("blip2-flan-t5-xl");
  Blip2T5::write_config(d / "config.json", c, "bfloat16");
  const auto back = Blip2T5::read_config(d / "config.json");
  CHECK(back.parameter_count() == c.parameter_count());
  CHECK(back.image_token_index == 32100);
  CHECK(back.num_query_tokens == 32);
  CHECK(back.vision.num_hidden_layers == 39);
  CHECK(back.qformer.cross_attention_frequency == 2);
  CHECK(back.text.d_model == 2048);
  CHECK(blip2_config_json(Blip2Opt::preset("tiny")) ==
        blip2_config_json(Blip2Opt::read_config([&] {
          Blip2Opt::write_config(d / "config.json", Blip2Opt::preset("tiny"), "float32");
          return d / "config.json";
        }())));
  // An OPT config read as BLIP-2 T5: the nested model_type says so.
  CHECK_THROWS_WITH(Blip2T5::read_config(d / "config.json"),
                    Catch::Contains("text_config") && Catch::Contains("model_type is \"opt\""));
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string text = blip2_config_json(Blip2Opt::preset("tiny"), "float32", 2);
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    std::ofstream(d / "config.json") << text;
  };
  edit("\"use_qformer_text_input\": false", "\"use_qformer_text_input\": true");
  CHECK_THROWS_WITH(Blip2Opt::read_config(d / "config.json"),
                    Catch::Contains("qformer_config") && Catch::Contains("use_qformer_text_input"));
  edit("\"image_token_index\": 4095", "\"image_token_index\": 5000");
  CHECK_THROWS_WITH(Blip2Opt::read_config(d / "config.json"),
                    Catch::Contains("image_token_index=5000") && Catch::Contains("vocab_size=4096"));
  edit("\"model_type\": \"blip-2\"", "\"model_type\": \"blip\"");
  CHECK_THROWS_WITH(Blip2Opt::read_config(d / "config.json"), Catch::Contains("model_type is \"blip\""));
  fs::remove_all(d);
}

TEST_CASE("freeze= names modules by path, unknown names and freezing everything are refused", "[models][blip2][freeze]") {
  const auto units = Blip2Opt::units(Blip2Opt::preset("tiny"));
  const std::vector<bool> none = frozen_units("none", units, "blip2-opt");
  CHECK(std::none_of(none.begin(), none.end(), [](bool f) { return f; }));
  const std::vector<bool> f = frozen_units("vision_model, language_model", units, "blip2-opt");
  for (std::size_t u = 0; u < units.size(); ++u) {
    INFO(units[u].module);
    CHECK(f[u] == (units[u].module.rfind("vision_model.", 0) == 0 || units[u].module.rfind("language_model.", 0) == 0));
  }
  CHECK(frozen_units("qformer", units, "blip2-opt")[5] == true);   // qformer.layernorm
  CHECK(frozen_units("qformer", units, "blip2-opt")[4] == false);  // query_tokens is not under qformer
  CHECK_THROWS_WITH(frozen_units("vision", units, "blip2-opt"),
                    Catch::Contains("freeze=vision: 'vision' is no module of blip2-opt") &&
                        Catch::Contains("vision_model"));
  CHECK_THROWS_WITH(
      frozen_units("vision_model,query_tokens,qformer,language_projection,language_model", units, "blip2-opt"),
      Catch::Contains("nothing would train"));
  CHECK_THROWS_WITH(frozen_units("none,qformer", units, "blip2-opt"), Catch::Contains("goes alone"));
}

TEST_CASE("BLIP-2 tiny: a training step on synthetic captions, frozen parts hold no gradients or optimizer state",
          "[models][blip2][freeze]") {
  RunConfig cfg = small_run(2, 1, 16);
  Trainer<Experiment<Blip2Opt>> all(cfg, quiet());
  const double loss = all.train_step(0).loss;
  CHECK(std::isfinite(loss));
  CHECK(loss > 0.5 * std::log(4096.0));  // near ln(vocab) from random weights
  cfg.freeze = "vision_model,language_model";
  Trainer<Experiment<Blip2Opt>> frozen(cfg, quiet());
  CHECK(std::abs(frozen.train_step(0).loss - loss) < 1e-5 * loss);  // the same first step's loss
  CHECK(frozen.optimizer_bytes() < all.optimizer_bytes() / 5);
  const auto units = Blip2Opt::units(frozen.model_config());
  frozen.accumulate_gradients(1);
  for (std::size_t u = 0; u < units.size(); ++u) {
    INFO(units[u].module);
    CHECK(frozen.flat_grad(u).defined() == (units[u].module.rfind("vision_model", 0) != 0 &&
                                            units[u].module.rfind("language_model", 0) != 0));
  }
  Trainer<Experiment<Blip2T5>> t5(small_run(2, 1, 16), quiet());
  CHECK(std::isfinite(t5.train_step(0).loss));
}
