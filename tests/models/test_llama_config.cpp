// Llama presets carry the published shapes: their parameter counts are checked without building weights.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "tessera/core/error.hpp"
#include "tessera/models/llama.hpp"

using namespace tessera;
using namespace tessera::models;

TEST_CASE("presets have their published parameter counts", "[models]") {
  // Counts as Hugging Face reports them for the checkpoints these presets mirror.
  CHECK(llama_preset("open-llama-3b").parameter_count() == 3'426'473'600);
  CHECK(llama_preset("open-llama-7b").parameter_count() == 6'738'415'616);
  CHECK(llama_preset("open-llama-13b").parameter_count() == 13'015'864'320);
  CHECK(llama_preset("code-llama-7b").parameter_count() == 6'738'546'688);
  CHECK(llama_preset("llama-1b").parameter_count() == 1'100'048'384);
  const auto tiny = llama_preset("tiny").parameter_count();
  CHECK(tiny > 1'000'000);
  CHECK(tiny < 10'000'000);
  CHECK(llama_preset("micro").parameter_count() == 156'480);  // docs/config.md's table
}

TEST_CASE("the parameter list agrees with the count and uses Hugging Face names", "[models]") {
  for (auto name : llama_preset_names()) {
    const LlamaConfig c = llama_preset(name);
    std::int64_t n = 0;
    for (const auto& spec : Llama::parameters(c)) n += spec.numel();
    CHECK(n == c.parameter_count());
  }
  LlamaConfig tied = llama_preset("tiny");
  tied.tie_word_embeddings = true;
  const auto specs = Llama::parameters(tied);
  CHECK(specs.front().name == "model.embed_tokens.weight");
  CHECK(specs.back().name == "model.norm.weight");
  CHECK(specs[2].name == "model.layers.0.self_attn.q_proj.weight");
  CHECK(specs.back().unit == static_cast<std::size_t>(tied.num_hidden_layers) + 1);
}

TEST_CASE("Llama's unit layout and program: every unit used, blocks typed, the tied head reads the embedding", "[models]") {
  STATIC_REQUIRE(ModelFamily<Llama>);
  for (const bool tie : {false, true}) {
    LlamaConfig c = llama_preset("tiny");
    c.tie_word_embeddings = tie;
    const auto units = Llama::units(c);
    const auto calls = Llama::calls(c);
    REQUIRE(units.size() == static_cast<std::size_t>(c.num_hidden_layers) + 2);
    REQUIRE(calls.size() == units.size());
    CHECK_FALSE(units.front().is_block());
    CHECK(units[1].block_type == "LlamaDecoderLayer");
    CHECK(units[1].module == "model.layers.0");
    CHECK_FALSE(units.back().is_block());
    std::vector<int> used(units.size(), 0);
    for (const auto& call : calls)
      for (std::size_t u : call.units) ++used.at(u);
    for (std::size_t u = 0; u < units.size(); ++u) CHECK(used[u] == (tie && u == 0 ? 2 : 1));
    for (const auto& spec : Llama::parameters(c)) {
      CHECK(spec.unit < units.size());
      CHECK(spec.name.starts_with(units[spec.unit].module) == (spec.name.find("lm_head") == std::string::npos));
      CHECK(spec.linear == (spec.name.find("_proj.") != std::string::npos));
    }
  }
}

TEST_CASE("unknown presets and bad config.json files are refused clearly", "[models]") {
  CHECK_THROWS_WITH(llama_preset("llama-9t"), Catch::Contains("model=llama-9t") && Catch::Contains("open-llama-7b"));
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-cfg-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "config.json") << text;
    return dir / "config.json";
  };
  CHECK_THROWS_WITH(read_llama_config(write("{\"model_type\":\"gpt2\"}")), Catch::Contains("model_type is \"gpt2\""));
  CHECK_THROWS_WITH(read_llama_config(write("{\"model_type\":\"llama\"")), Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(read_llama_config(write("{\"model_type\":\"llama\",\"vocab_size\":32000}")),
                    Catch::Contains("missing key \"hidden_size\""));
  CHECK_THROWS_WITH(
      read_llama_config(write(R"({"model_type":"llama","vocab_size":100,"hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":3})")),
      Catch::Contains("num_key_value_heads=3"));
  CHECK_THROWS_WITH(
      read_llama_config(write(R"({"model_type":"llama","vocab_size":100,"hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"rope_scaling":{"type":"linear","factor":2.0}})")),
      Catch::Contains("rope_scaling"));
  const LlamaConfig ok = read_llama_config(
      write(R"({"model_type":"llama","vocab_size":100,"hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"rope_theta":500000.0,"tie_word_embeddings":true})"));
  CHECK(ok.num_key_value_heads == 4);
  CHECK(ok.head_dim == 16);
  CHECK(ok.rope_theta == 500000.0);
  CHECK(ok.tie_word_embeddings);
  write_llama_config(dir / "config.json", ok, "float32");
  const LlamaConfig back = read_llama_config(dir / "config.json");
  CHECK(back.parameter_count() == ok.parameter_count());
  CHECK(back.rope_theta == ok.rope_theta);
  std::filesystem::remove_all(dir);
}

TEST_CASE("config.json: transformers 5's rope_parameters give rope_theta, other rope types are refused", "[models]") {
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-cfg-rope-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto read_with = [&](const std::string& rope) {
    std::ofstream(dir / "config.json") << R"({"model_type":"llama","vocab_size":100,"hidden_size":64,)"
                                       << R"("intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,)"
                                       << R"("rope_parameters":)" << rope << "}";
    return read_llama_config(dir / "config.json");
  };
  CHECK(read_with(R"({"rope_theta": 500000.0, "rope_type": "default"})").rope_theta == 500000.0);
  CHECK(read_with(R"({"rope_type": "default"})").rope_theta == 10000.0);
  CHECK_THROWS_WITH(read_with(R"({"rope_type": "llama3", "factor": 8.0, "rope_theta": 500000.0})"),
                    Catch::Contains("rope_parameters {") && Catch::Contains("rope_type \"default\""));
  CHECK_THROWS_WITH(read_with("5"), Catch::Contains("\"rope_parameters\" must be an object, got a number 5"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("config.json: wrong JSON types name the file, the key, the type found and the type wanted", "[models]") {
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-cfg-types-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string shape = R"("model_type":"llama","vocab_size":100,"hidden_size":64,"intermediate_size":128,
                                "num_hidden_layers":2,"num_attention_heads":4)";
  auto read_with = [&](const std::string& extra) {
    std::ofstream(dir / "config.json") << "{" << shape << "," << extra << "}";
    return read_llama_config(dir / "config.json");
  };
  const std::string file = (dir / "config.json").string();
  CHECK_THROWS_WITH(read_with(R"("tie_word_embeddings": 1)"),
                    file + ": \"tie_word_embeddings\" must be a boolean (true or false), got a number 1");
  CHECK_THROWS_WITH(read_with(R"("hidden_act": null)"), file + ": \"hidden_act\" must be a string, got null");
  CHECK_THROWS_WITH(read_with(R"("rms_norm_eps": "1e-6")"),
                    file + ": \"rms_norm_eps\" must be a number, got a string \"1e-6\"");
  CHECK_THROWS_WITH(read_with(R"("attention_bias": "no")"), Catch::Contains("\"attention_bias\" must be a boolean"));
  CHECK_THROWS_WITH(read_with(R"("head_dim": 16.0)"), Catch::Contains("\"head_dim\" must be an integer, got a number 16.0"));
  CHECK_THROWS_WITH(read_with(R"("max_position_embeddings": 0)"), Catch::Contains("max_position_embeddings=0 must be positive"));
  CHECK_THROWS_WITH(read_with(R"("max_position_embeddings": -5)"), Catch::Contains("max_position_embeddings=-5"));
  CHECK_THROWS_WITH(read_with(R"("num_hidden_layers": 100000)"), Catch::Contains("num_hidden_layers=100000 exceeds 4096"));
  CHECK_THROWS_WITH(read_with(R"("rope_scaling": )" + std::string(1000, '[') + std::string(1000, ']')),
                    Catch::Contains("nests deeper than 64 levels"));
  std::filesystem::remove(dir / "config.json");
  std::filesystem::create_directories(dir / "config.json");
  CHECK_THROWS_WITH(read_llama_config(dir / "config.json"), file + ": is a directory, not a JSON file; a Hugging Face "
                                                                   "Llama directory needs its config.json");
  std::filesystem::remove_all(dir);
}
