// T5 presets carry Flan-T5's published shapes: their parameter counts are checked without building weights. The unit
// and call layout, the relative-position buckets, config.json in and out (tied or not, as transformers decides), and
// a forward pass on plain tensors with padding.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "tessera/core/error.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/models/direct_runner.hpp"
#include "tessera/models/t5.hpp"
#include "models/random_units.hpp"

using namespace tessera;
using namespace tessera::models;

static_assert(ModelFamily<T5>, "T5 must satisfy the family concept that Experiment<> checks");

namespace {

T5Config small() {
  T5Config c = t5_preset("tiny");
  c.vocab_size = 50;
  c.d_model = 16;
  c.d_kv = 4;
  c.num_heads = 2;
  c.d_ff = 24;
  c.num_layers = 2;
  c.num_decoder_layers = 3;
  c.relative_attention_num_buckets = 8;
  c.relative_attention_max_distance = 20;
  return c;
}

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("tessera-t5-cfg-" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("T5 presets have Flan-T5's published parameter counts", "[models][t5]") {
  // sum(p.numel() for p in T5ForConditionalGeneration(config).parameters()) with the model built under
  // `with torch.device("meta")` (transformers 5.17; no weights allocated) for google/flan-t5-*'s config.json, lm_head
  // its own tensor as in those checkpoints: 77.0M, 248M, 783M, 2.85B and 11.1B, the published sizes.
  CHECK(t5_preset("tiny").parameter_count() == 6'820'608);
  CHECK(t5_preset("flan-t5-small").parameter_count() == 76'961'152);
  CHECK(t5_preset("flan-t5-base").parameter_count() == 247'577'856);
  CHECK(t5_preset("flan-t5-large").parameter_count() == 783'150'080);
  CHECK(t5_preset("flan-t5-xl").parameter_count() == 2'849'757'184);
  CHECK(t5_preset("flan-t5-xxl").parameter_count() == 11'135'332'352);
}

TEST_CASE("T5: parameters agree with the count, use Hugging Face names, and the calls read the units in order",
          "[models][t5]") {
  std::vector<T5Config> configs{small()};
  for (auto name : t5_preset_names()) configs.push_back(t5_preset(name));
  T5Config tied = small();
  tied.tie_word_embeddings = true;
  tied.gated_gelu = false;
  configs.push_back(tied);
  for (const T5Config& c : configs) {
    const auto specs = T5::parameters(c);
    const auto units = T5::units(c);
    const auto calls = T5::calls(c);
    std::int64_t n = 0;
    std::size_t last_unit = 0;
    std::vector<std::int64_t> per_unit(units.size(), 0);
    for (const auto& spec : specs) {
      n += spec.numel();
      REQUIRE(spec.unit < units.size());
      CHECK(spec.unit >= last_unit);  // spec order is unit order: initialization draws in it
      last_unit = spec.unit;
      per_unit[spec.unit] += spec.numel();
      if (spec.init == ParamInit::normal) CHECK(spec.init_std > 0.0);
    }
    CHECK(n == c.parameter_count());
    for (std::size_t u = 0; u < units.size(); ++u) CHECK(per_unit[u] > 0);
    const auto e = static_cast<std::size_t>(c.num_layers), d = static_cast<std::size_t>(c.num_decoder_layers);
    REQUIRE(units.size() == e + d + 5);
    REQUIRE(calls.size() == units.size() + 1);  // shared is read by both embeddings
    CHECK(units[2].module == "encoder.block.0");
    CHECK(units[2].block_type == "T5Block");
    CHECK(units[e + 4].module == "decoder.block.0");
    CHECK(units[e + 4].block_type == "T5Block");
    CHECK(units[1].module == "encoder.block.0.layer.0.SelfAttention.relative_attention_bias");
    CHECK(!units[1].is_block());
    CHECK(calls[0].units == std::vector<std::size_t>{0});
    CHECK(calls[e + 3].units == std::vector<std::size_t>{0});  // the decoder's embedding
    CHECK(calls[e + 4].units == std::vector<std::size_t>{e + 3});
    CHECK(calls.back().units == (c.tie_word_embeddings ? std::vector<std::size_t>{units.size() - 1, 0}
                                                       : std::vector<std::size_t>{units.size() - 1}));
  }
  const T5Config xl = t5_preset("flan-t5-xl");
  const auto specs = T5::parameters(xl);
  CHECK(specs[0].name == "shared.weight");
  CHECK(specs[0].aliases == std::vector<std::string>{"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"});
  CHECK(specs[0].init_std == 1.0);
  CHECK(specs[1].name == "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight");
  CHECK(specs[1].shape == std::vector<std::int64_t>{32, 32});
  CHECK(specs[2].name == "encoder.block.0.layer.0.SelfAttention.q.weight");
  CHECK(specs[2].linear);
  CHECK(specs[2].init_std == Approx(std::pow(2048.0 * 64.0, -0.5)));  // T5's q: (d_model * d_kv)^-0.5
  CHECK(specs[9].name == "encoder.block.0.layer.1.DenseReluDense.wo.weight");
  CHECK(specs[9].init_std == Approx(std::pow(5120.0, -0.5)));
  CHECK(specs.back().name == "lm_head.weight");
  CHECK(T5::data_spec(xl).vocab_size == 32128);
  CHECK(T5::data_spec(xl).pad_token_id == 0);
}

TEST_CASE("T5 relative-position buckets are transformers' (T5Attention._relative_position_bucket)", "[models][t5]") {
  // Reference values: T5Attention._relative_position_bucket(memory - context, bidirectional, 32, 128) in
  // transformers 5.17 for query 0 and keys 0, 1, 7, 8, 15, 16, 50, 127, 128, 500, and (bidirectional) the mirror.
  const T5Config c = t5_preset("flan-t5-small");
  const at::Tensor enc = T5::position_buckets(c, 501, 501, true, c10::Device("cpu"));
  const at::Tensor dec = T5::position_buckets(c, 501, 501, false, c10::Device("cpu"));
  const std::vector<std::int64_t> keys{0, 1, 7, 8, 15, 16, 50, 127, 128, 500};
  const std::vector<std::int64_t> ahead{0, 17, 23, 24, 25, 26, 29, 31, 31, 31};   // key after the query
  const std::vector<std::int64_t> behind{0, 1, 7, 8, 9, 10, 13, 15, 15, 15};     // key before the query
  const std::vector<std::int64_t> causal{0, 1, 7, 8, 15, 16, 24, 31, 31, 31};     // decoder: key before the query
  for (std::size_t i = 0; i < keys.size(); ++i) {
    INFO("distance " << keys[i]);
    CHECK(enc[0][keys[i]].item<std::int64_t>() == ahead[i]);
    CHECK(enc[500][500 - keys[i]].item<std::int64_t>() == behind[i]);
    CHECK(dec[500][500 - keys[i]].item<std::int64_t>() == causal[i]);
    CHECK(dec[0][keys[i]].item<std::int64_t>() == 0);  // later keys: bucket 0, masked anyway
  }
}

TEST_CASE("T5 forward on plain tensors: finite loss near log(vocab), padding ignored, every gradient",
          "[models][t5]") {
  at::manual_seed(3);
  const T5Config c = small();
  auto units = testing::random_units<T5>(c);
  const auto ctx = T5::make_context(c, 12, at::kFloat, c10::Device("cpu"));
  DirectRunner<T5> run(c, ctx, units);
  Seq2SeqBatch batch{at::randint(2, c.vocab_size, {2, 12}, at::kLong), at::ones({2, 12}, at::kLong),
                     at::randint(2, c.vocab_size, {2, 6}, at::kLong)};
  batch.labels[1][5] = kIgnoreIndex;
  const at::Tensor loss = T5::forward(c, run, batch);
  CHECK(std::isfinite(loss.item<double>()));
  CHECK(std::abs(loss.item<double>() - std::log(50.0)) < 1.5);
  loss.backward();
  for (const auto& unit : units)
    for (const auto& p : unit) CHECK(p.grad().defined());

  // A padded row computes what the unpadded row does: the mask hides the pads from every attention.
  at::NoGradGuard no_grad;
  Seq2SeqBatch one{batch.inputs.narrow(0, 0, 1).narrow(1, 0, 9), at::ones({1, 9}, at::kLong),
                   batch.labels.narrow(0, 0, 1)};
  Seq2SeqBatch padded{at::cat({one.inputs, at::zeros({1, 3}, at::kLong)}, 1),
                      at::cat({one.attention_mask, at::zeros({1, 3}, at::kLong)}, 1), one.labels};
  CHECK(T5::forward(c, run, padded).item<double>() == Approx(T5::forward(c, run, one).item<double>()).epsilon(1e-6));
  // Labels -100 after a row's end are ignored, and the decoder is causal: the loss of the first 4 labels alone.
  Seq2SeqBatch shorter{one.inputs, one.attention_mask, one.labels.narrow(1, 0, 4)};
  Seq2SeqBatch ignored{one.inputs, one.attention_mask, one.labels.clone()};
  ignored.labels.narrow(1, 4, 2).fill_(kIgnoreIndex);
  CHECK(T5::forward(c, run, ignored).item<double>() == Approx(T5::forward(c, run, shorter).item<double>()).epsilon(1e-6));
  CHECK(T5::shift_right(c, ignored.labels).narrow(1, 5, 1).item<std::int64_t>() == c.pad_token_id);
  CHECK(T5::shift_right(c, ignored.labels)[0][0].item<std::int64_t>() == c.decoder_start_token_id);

  // A batch longer than the context is refused with the fix.
  Seq2SeqBatch longer{at::randint(2, c.vocab_size, {1, 13}, at::kLong), at::ones({1, 13}, at::kLong), one.labels};
  CHECK_THROWS_WITH(T5::forward(c, run, longer), Catch::Contains("seq_len >= 13"));
}

TEST_CASE("T5: config.json in and out, tied as transformers ties, and bad files refused", "[models][t5]") {
  CHECK_THROWS_WITH(t5_preset("flan-t5-xxxl"), Catch::Contains("model=flan-t5-xxxl") && Catch::Contains("flan-t5-xxl"));
  TempDir dir;
  const std::string shape = R"("model_type":"t5","vocab_size":64,"d_model":16,"d_kv":4,"d_ff":24,"num_layers":2,
                                "num_heads":2)";
  auto read_with = [&](const std::string& extra) {
    std::ofstream(dir.path / "config.json") << "{" << shape << (extra.empty() ? "" : ",") << extra << "}";
    return read_t5_config(dir.path / "config.json");
  };
  // T5Config's defaults: relu, tied and scaled (the original T5); Flan-T5's files say gated-gelu and untied.
  const T5Config original = read_with("");
  CHECK(!original.gated_gelu);
  CHECK(original.tie_word_embeddings);
  CHECK(original.scale_decoder_outputs);
  CHECK(original.num_decoder_layers == 2);
  const T5Config flan = read_with(R"("feed_forward_proj":"gated-gelu","tie_word_embeddings":false,"num_decoder_layers":3)");
  CHECK(flan.gated_gelu);
  CHECK(!flan.tie_word_embeddings);
  CHECK(!flan.scale_decoder_outputs);
  CHECK(flan.num_decoder_layers == 3);
  // transformers 5 writes tie_word_embeddings true and scale_decoder_outputs false for Flan-T5; the explicit key wins.
  CHECK(!read_with(R"("tie_word_embeddings":true,"scale_decoder_outputs":false)").scale_decoder_outputs);

  // A checkpoint beside the file with its own lm_head.weight keeps it untied (as from_pretrained does).
  {
    ParamStore store(T5::parameters(flan), at::kFloat, c10::Device("cpu"));
    store.initialize(0.02, 1);
    store.save(dir.path, store.full_units());
  }
  CHECK(!read_with(R"("feed_forward_proj":"gated-gelu","tie_word_embeddings":true,"num_decoder_layers":3)")
             .tie_word_embeddings);

  write_t5_config(dir.path / "config.json", flan, "bfloat16");
  const T5Config back = read_t5_config(dir.path / "config.json");
  CHECK(back.parameter_count() == flan.parameter_count());
  CHECK(back.gated_gelu);
  CHECK(!back.tie_word_embeddings);
  CHECK(!back.scale_decoder_outputs);
  std::filesystem::remove(dir.path / "model.safetensors");

  CHECK_THROWS_WITH(read_with(R"("feed_forward_proj":"gated-silu")"), Catch::Contains("\"gated-silu\" is not supported"));
  CHECK_THROWS_WITH(read_with(R"("relative_attention_num_buckets":2)"), Catch::Contains("at least 4"));
  CHECK_THROWS_WITH(read_with(R"("relative_attention_max_distance":8,"relative_attention_num_buckets":32)"),
                    Catch::Contains("must exceed relative_attention_num_buckets / 2 = 16"));
  CHECK_THROWS_WITH(read_with(R"("pad_token_id":64)"), Catch::Contains("pad_token_id=64"));
  CHECK_THROWS_AS(read_with(R"("d_kv":0)"), FormatError);
  CHECK_THROWS_WITH(read_with(R"("num_decoder_layers":"three")"), Catch::Contains("num_decoder_layers"));
}

TEST_CASE("T5: shared.weight is read from a checkpoint's tied copies, which must be copies", "[models][t5]") {
  TempDir dir;
  T5Config c = small();
  std::vector<ParamSpec> specs = T5::parameters(c);
  // A checkpoint as older files hold it: shared.weight and its copy encoder.embed_tokens.weight (unit 0 both).
  std::vector<ParamSpec> with_copy = specs;
  with_copy.insert(with_copy.begin() + 1, ParamSpec{"encoder.embed_tokens.weight", specs[0].shape, 0});
  ParamStore file(with_copy, at::kFloat, c10::Device("cpu"));
  file.initialize(0.02, 4);  // the copy drawn apart from shared: they differ
  file.save(dir.path, file.full_units());
  ParamStore store(specs, at::kFloat, c10::Device("cpu"));
  CHECK_THROWS_WITH(store.load(io::CheckpointDir::open(dir.path)),
                    Catch::Contains("'shared.weight' and 'encoder.embed_tokens.weight' differ"));
  // The copy equal to shared: loads; and the copy alone stands for shared.
  {
    auto views = file.unit_views(0, file.flat_param(0));
    views[1].copy_(views[0]);
  }
  file.save(dir.path, file.full_units());
  store.load(io::CheckpointDir::open(dir.path));
  const at::Tensor shared = file.unit_views(0, file.flat_param(0))[0];
  CHECK(at::equal(store.unit_views(0, store.flat_param(0))[0], shared));
  std::vector<ParamSpec> copy_only = with_copy;
  copy_only.erase(copy_only.begin());
  ParamStore alone(copy_only, at::kFloat, c10::Device("cpu"));
  for (std::size_t u = 0; u < alone.num_units(); ++u) alone.flat_param(u).narrow(0, 0, alone.unit_numel(u))
      .copy_(file.flat_param(u).narrow(0, u == 0 ? shared.numel() : 0, alone.unit_numel(u)));
  std::filesystem::remove(dir.path / "model.safetensors");
  alone.save(dir.path, alone.full_units());
  ParamStore again(specs, at::kFloat, c10::Device("cpu"));
  again.load(io::CheckpointDir::open(dir.path));
  CHECK(at::equal(again.unit_views(0, again.flat_param(0))[0], shared));
}
