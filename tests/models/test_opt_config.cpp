// OPT presets carry the published shapes: their parameter counts are checked without building weights. The unit
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
#include "tessera/models/opt.hpp"
#include "models/random_units.hpp"

using namespace tessera;
using namespace tessera::models;

static_assert(ModelFamily<Opt>, "Opt must satisfy the family concept that Experiment<> checks");

namespace {

// The four layouts the head can take: pre-LN tied (final norm + embedding), post-LN projecting (project_out +
// embedding, opt-350m), untied (final norm + lm_head), post-LN tied without projections (no head unit).
OptConfig small(bool pre_ln, std::int64_t word_dim, bool tied) {
  OptConfig c = opt_preset("tiny");
  c.vocab_size = 96;
  c.hidden_size = 32;
  c.ffn_dim = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.max_position_embeddings = 16;
  c.word_embed_proj_dim = word_dim;
  c.do_layer_norm_before = pre_ln;
  c.tie_word_embeddings = tied;
  return c;
}

}  // namespace

TEST_CASE("OPT presets have their published parameter counts", "[models][opt]") {
  // sum(p.numel() for p in OPTForCausalLM(OPTConfig(...)).parameters()) with the model built under
  // `with torch.device("meta")` (transformers 5.17; no weights allocated), for each preset's shape keys.
  // The published ones agree with the facebook/opt-* checkpoints on the Hugging Face hub.
  CHECK(opt_preset("tiny").parameter_count() == 4'470'784);
  CHECK(opt_preset("opt-125m").parameter_count() == 125'239'296);
  CHECK(opt_preset("opt-350m").parameter_count() == 331'196'416);
  CHECK(opt_preset("opt-1.3b").parameter_count() == 1'315'758'080);
  CHECK(opt_preset("opt-2.7b").parameter_count() == 2'651'596'800);
  CHECK(opt_preset("opt-6.7b").parameter_count() == 6'658'473'984);
}

TEST_CASE("OPT: the parameter list agrees with the count, uses Hugging Face names and fills valid units",
          "[models][opt]") {
  std::vector<OptConfig> configs;
  for (auto name : opt_preset_names()) configs.push_back(opt_preset(name));
  for (bool pre : {true, false})
    for (std::int64_t word : {32, 16})
      for (bool tied : {true, false}) configs.push_back(small(pre, word, tied));
  for (const OptConfig& c : configs) {
    const auto specs = Opt::parameters(c);
    const auto units = Opt::units(c);
    const auto calls = Opt::calls(c);
    std::int64_t n = 0;
    std::vector<std::int64_t> per_unit(units.size(), 0);
    for (const auto& spec : specs) {
      n += spec.numel();
      REQUIRE(spec.unit < units.size());
      per_unit[spec.unit] += spec.numel();
    }
    CHECK(n == c.parameter_count());
    // Every unit holds parameters and is read by some call; calls = embedding, blocks, head.
    std::set<std::size_t> read;
    for (const auto& call : calls) read.insert(call.units.begin(), call.units.end());
    for (std::size_t u = 0; u < units.size(); ++u) {
      CHECK(per_unit[u] > 0);
      CHECK(read.count(u) == 1);
    }
    REQUIRE(calls.size() == static_cast<std::size_t>(c.num_hidden_layers) + 2);
    CHECK(units[1].block_type == "OPTDecoderLayer");
    CHECK(units[1].module == "model.decoder.layers.0");
    CHECK(!units[0].is_block());
    CHECK(units.size() == static_cast<std::size_t>(c.num_hidden_layers) + (c.has_head_unit() ? 2 : 1));
  }
  const auto specs = Opt::parameters(opt_preset("opt-350m"));
  CHECK(specs[0].name == "model.decoder.embed_tokens.weight");
  CHECK(specs[0].shape == std::vector<std::int64_t>{50272, 512});
  CHECK(specs[1].name == "model.decoder.embed_positions.weight");
  CHECK(specs[1].shape == std::vector<std::int64_t>{2050, 1024});
  CHECK(specs[2].name == "model.decoder.project_in.weight");
  CHECK(specs[2].linear);
  CHECK(specs[5].name == "model.decoder.layers.0.self_attn.q_proj.weight");
  CHECK(specs[5].linear);
  CHECK(!specs[6].linear);
  CHECK(specs.back().name == "model.decoder.project_out.weight");  // post-LN: no final_layer_norm
  CHECK(Opt::calls(opt_preset("opt-350m")).back().units == std::vector<std::size_t>{25, 0});
  CHECK(Opt::calls(small(false, 32, true)).back().units == std::vector<std::size_t>{0});
  CHECK(Opt::parameters(small(true, 32, false)).back().name == "lm_head.weight");
}

TEST_CASE("OPT forward on plain tensors: a finite loss near log(vocab) in every head layout", "[models][opt]") {
  at::manual_seed(3);
  for (bool pre : {true, false})
    for (std::int64_t word : {32, 16})
      for (bool tied : {true, false}) {
        const OptConfig c = small(pre, word, tied);
        const auto ctx = Opt::make_context(c, 8, at::kFloat, c10::Device("cpu"));
        CHECK(ctx.positions[0].item<std::int64_t>() == 2);
        CHECK(ctx.positions[7].item<std::int64_t>() == 9);
        auto units = testing::random_units<Opt>(c);
        DirectRunner<Opt> run(c, ctx, units);
        TokenBatch batch{at::randint(c.vocab_size, {2, 8}, at::kLong), at::randint(c.vocab_size, {2, 8}, at::kLong)};
        batch.inputs[0][0] = c.pad_token_id;
        const at::Tensor loss = Opt::forward(c, run, batch);
        const double value = loss.item<double>();
        CHECK(std::isfinite(value));
        CHECK(std::abs(value - std::log(static_cast<double>(c.vocab_size))) < 1.5);
        loss.backward();
        for (const auto& unit : units)
          for (const auto& p : unit) CHECK(p.grad().defined());
        if (!tied)  // nn.Embedding's padding_idx: the pad row learns nothing from the lookup
          CHECK(units[0][0].grad()[c.pad_token_id].abs().max().item<float>() == 0.0f);
      }
}

TEST_CASE("OPT: a sequence longer than the learned positions is refused", "[models][opt]") {
  const OptConfig c = small(true, 32, true);
  CHECK_THROWS_WITH(Opt::make_context(c, 17, at::kFloat, c10::Device("cpu")),
                    Catch::Contains("seq_len=17 exceeds max_position_embeddings=16") &&
                        Catch::Contains("set seq_len=16 or less"));
  CHECK_NOTHROW(Opt::make_context(c, 16, at::kFloat, c10::Device("cpu")));
}

TEST_CASE("OPT: unknown presets and bad config.json files are refused clearly", "[models][opt]") {
  CHECK_THROWS_WITH(opt_preset("opt-175b"), Catch::Contains("model=opt-175b") && Catch::Contains("opt-6.7b"));
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-opt-cfg-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "config.json").string();
  const std::string shape = R"("model_type":"opt","vocab_size":100,"hidden_size":64,"ffn_dim":128,
                                "num_hidden_layers":2,"num_attention_heads":4)";
  auto read_with = [&](const std::string& extra) {
    std::ofstream(dir / "config.json") << "{" << shape << (extra.empty() ? "" : ",") << extra << "}";
    return read_opt_config(dir / "config.json");
  };
  auto read_text = [&](const std::string& text) {
    std::ofstream(dir / "config.json") << text;
    return read_opt_config(dir / "config.json");
  };
  CHECK_THROWS_WITH(read_text(R"({"model_type":"llama"})"), Catch::Contains("model_type is \"llama\""));
  CHECK_THROWS_WITH(read_text(R"({"model_type":"opt","vocab_size":100})"), Catch::Contains("missing key \"hidden_size\""));
  CHECK_THROWS_WITH(read_with(R"("activation_function":"gelu")"),
                    file + ": \"activation_function\" \"gelu\" is not supported; tessera's OPT computes \"relu\", "
                           "as every published OPT checkpoint");
  CHECK_THROWS_WITH(read_with(R"("enable_bias":false)"), Catch::Contains("\"enable_bias\": false is not supported"));
  CHECK_THROWS_WITH(read_with(R"("layer_norm_elementwise_affine":false)"),
                    Catch::Contains("\"layer_norm_elementwise_affine\": false is not supported"));
  CHECK_THROWS_WITH(read_with(R"("num_attention_heads":5)"),
                    Catch::Contains("hidden_size=64 is not a multiple of num_attention_heads=5"));
  CHECK_THROWS_WITH(read_with(R"("pad_token_id":100)"), Catch::Contains("pad_token_id=100"));
  CHECK_THROWS_WITH(read_with(R"("do_layer_norm_before":1)"),
                    file + ": \"do_layer_norm_before\" must be a boolean (true or false), got a number 1");
  CHECK_THROWS_WITH(read_with(R"("word_embed_proj_dim":32.0)"),
                    Catch::Contains("\"word_embed_proj_dim\" must be an integer, got a number 32.0"));
  CHECK_THROWS_WITH(read_with(R"("init_std":"0.02")"), file + ": \"init_std\" must be a number, got a string \"0.02\"");
  CHECK_THROWS_WITH(read_with(R"("max_position_embeddings":0)"),
                    Catch::Contains("max_position_embeddings=0 must be positive"));

  // OPTConfig's defaults: word_embed_proj_dim = hidden_size, pre-LN, tied, pad 1, 2048 positions.
  const OptConfig plain = read_with("");
  CHECK(plain.word_embed_proj_dim == 64);
  CHECK(!plain.has_projections());
  CHECK(plain.do_layer_norm_before);
  CHECK(plain.tie_word_embeddings);
  CHECK(plain.pad_token_id == 1);
  CHECK(plain.max_position_embeddings == 2048);
  CHECK(read_with(R"("pad_token_id":null)").pad_token_id == -1);
  CHECK(!read_with(R"("_remove_final_layer_norm":true)").has_final_layer_norm());

  const OptConfig post = read_with(R"("word_embed_proj_dim":32,"do_layer_norm_before":false,"init_std":0.01,
                                      "tie_word_embeddings":false,"dropout":0.1,"max_position_embeddings":64)");
  write_opt_config(dir / "config.json", post, "float32");
  const OptConfig back = read_opt_config(dir / "config.json");
  CHECK(back.parameter_count() == post.parameter_count());
  CHECK(back.word_embed_proj_dim == 32);
  CHECK(!back.do_layer_norm_before);
  CHECK(!back.tie_word_embeddings);
  CHECK(back.initializer_range == 0.01);
  CHECK(back.max_position_embeddings == 64);
  std::filesystem::remove_all(dir);
}
