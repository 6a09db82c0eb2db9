// Lora: adapters on the target linears of a frozen base, PEFT directories, merging, dropout under
// checkpointing, the memory table's figures.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support.hpp"
#include "tessera/io/checkpoint_dir.hpp"

using namespace tessera;
using testing::rel_norm_diff;
using testing::small_run;
using testing::quiet;

namespace fs = std::filesystem;

namespace {

using LoraFp32 = Experiment<models::Llama, Lora>;

fs::path temp_dir(const std::string& tag) {
  static int counter = 0;
  return fs::temp_directory_path() /
         ("tessera-lora-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

std::vector<at::Tensor> adapter_values(Trainer<LoraFp32>& t) {
  std::vector<at::Tensor> out;
  for (const auto& f : t.full_params()) out.push_back(f.clone());
  return out;
}

}  // namespace

TEST_CASE("Lora: only the adapters train, r*(in+out) parameters per adapted linear", "[adapter][lora]") {
  RunConfig cfg = small_run();
  cfg.lr = 1e-2;
  Trainer<LoraFp32> t(cfg, quiet());
  const auto& c = t.model_config();
  // Default targets q_proj and v_proj in every block.
  REQUIRE(t.adapters().sites().size() == static_cast<std::size_t>(2 * c.num_hidden_layers));
  std::int64_t expected = 0;
  for (const auto& s : t.adapters().sites()) expected += 16 * (s.in + s.out);
  CHECK(t.params().numel() == expected);
  for (const auto& spec : t.params().specs()) {
    const bool a = spec.name.ends_with(".lora_A.weight"), b = spec.name.ends_with(".lora_B.weight");
    CHECK((a || b));
    CHECK(spec.name.starts_with("base_model.model.model.layers."));
  }
  const std::vector<at::Tensor> base_before = [&] {
    std::vector<at::Tensor> v;
    for (std::size_t u = 0; u < t.params().num_units(); ++u)  // every unit: embedding, blocks, head
      for (const auto& p : t.frozen_base()->unit(u)) v.push_back(p.clone());
    return v;
  }();
  const auto before = adapter_values(t);
  t.train_step(0);
  t.train_step(1);
  CHECK(t.optimizer_bytes() == 8 * t.params().param_bytes() / 4);  // AdamW: two fp32 moments per adapter parameter
  const auto after = adapter_values(t);
  for (std::size_t u = 1; u <= static_cast<std::size_t>(c.num_hidden_layers); ++u)
    CHECK(rel_norm_diff(after[u], before[u]) > 1e-3);
  std::size_t k = 0;
  for (std::size_t u = 0; u < t.params().num_units(); ++u)
    for (const auto& p : t.frozen_base()->unit(u)) CHECK(at::equal(p, base_before[k++]));  // frozen
  CHECK(k == base_before.size());
  CHECK(k == t.frozen_base()->specs().size());
}

TEST_CASE("Lora starts from the base model: B = 0 gives the full model's first loss", "[adapter][lora]") {
  const RunConfig cfg = small_run();
  Trainer<LoraFp32> lora(cfg, quiet());
  Trainer<Experiment<models::Llama, Fp32>> full(cfg, quiet());
  CHECK(std::abs(lora.train_step(0).loss - full.train_step(0).loss) < 1e-6);
  // A is kaiming-uniform: |A| <= 1/sqrt(in), and not all zero.
  const std::vector<at::Tensor> views = lora.params().unit_views(1, lora.params().full_units()[1]);
  const double bound = 1.0 / std::sqrt(static_cast<double>(lora.model_config().hidden_size));
  CHECK(views[0].abs().max().item<double>() <= bound);
  CHECK(views[0].abs().max().item<double>() > 0.5 * bound);
}

TEST_CASE("Lora dropout: the same masks in a checkpointed block's recomputation", "[adapter][lora][checkpoint]") {
  RunConfig cfg = small_run();
  cfg.lr = 1e-2;
  cfg.lora_dropout = 0.3;
  Trainer<LoraFp32> plain(cfg, quiet());
  Trainer<Experiment<models::Llama, Lora, CheckpointEveryBlock>> ckpt(cfg, quiet());
  std::vector<double> with_dropout;
  for (int s = 0; s < 3; ++s) {
    with_dropout.push_back(plain.train_step(s).loss);
    CHECK(std::abs(with_dropout.back() - ckpt.train_step(s).loss) < 1e-6);
  }
  const auto a = plain.full_params(), b = ckpt.full_params();
  for (std::size_t u = 0; u < a.size(); ++u)
    if (a[u].numel()) CHECK(rel_norm_diff(b[u], a[u]) < 1e-6);
  // Dropout does act: without it the trajectory differs (from step 1 on: B = 0 at step 0).
  cfg.lora_dropout = 0.0;
  Trainer<LoraFp32> none(cfg, quiet());
  double diff = 0;
  for (int s = 0; s < 3; ++s) diff += std::abs(none.train_step(s).loss - with_dropout[s]);
  CHECK(diff > 1e-6);
}

TEST_CASE("Lora saves a PEFT directory and resumes from it with adapter=DIR", "[adapter][lora][io]") {
  RunConfig cfg = small_run();
  cfg.lr = 1e-2;
  cfg.lora_r = 8;
  cfg.lora_alpha = 24;
  cfg.lora_targets = "q_proj,k_proj,down_proj";
  cfg.max_steps = 2;
  const fs::path dir = temp_dir("save");
  cfg.save_dir = dir.string();
  std::vector<at::Tensor> trained;
  {
    Trainer<LoraFp32> t(cfg, quiet());
    t.run();
    trained = adapter_values(t);
  }
  REQUIRE(fs::is_regular_file(dir / "adapter_config.json"));
  REQUIRE(fs::is_regular_file(dir / "adapter_model.safetensors"));
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "adapter_config.json"));
  CHECK(j["peft_type"] == "LORA");
  CHECK(j["r"] == 8);
  CHECK(j["lora_alpha"] == 24.0);
  CHECK(j["target_modules"] == nlohmann::json::array({"down_proj", "k_proj", "q_proj"}));
  const io::CheckpointDir file = io::CheckpointDir::open_file(dir / "adapter_model.safetensors");
  const io::TensorInfo* a = file.find("base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  const io::TensorInfo* b = file.find("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
  REQUIRE(a);
  REQUIRE(b);
  Trainer<LoraFp32> probe(small_run(), quiet());
  const auto& c = probe.model_config();
  CHECK(a->shape == std::vector<std::int64_t>{8, c.hidden_size});
  CHECK(b->shape == std::vector<std::int64_t>{c.hidden_size, 8});
  CHECK(file.names().size() == static_cast<std::size_t>(2 * 3 * c.num_hidden_layers));

  // adapter=DIR sets r, alpha and the targets from its config (lora_dropout stays the run config's).
  RunConfig resume = small_run();
  resume.adapter = dir.string();
  Trainer<LoraFp32> t(resume, quiet());
  CHECK(t.adapters().settings().r == 8);
  CHECK(t.adapters().settings().alpha == 24.0);
  CHECK(t.adapters().settings().scaling() == 3.0);
  // ... and the run config may not contradict it.
  RunConfig contradicts = resume;
  contradicts.lora_r = 4;
  CHECK_THROWS_WITH(Trainer<LoraFp32>(contradicts, quiet()), Catch::Contains("lora_r=4") && Catch::Contains("r 8"));
  contradicts = resume;
  contradicts.lora_targets = "q_proj";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(contradicts, quiet()), Catch::Contains("lora_targets=q_proj"));
  const auto loaded = adapter_values(t);
  REQUIRE(loaded.size() == trained.size());
  for (std::size_t u = 0; u < loaded.size(); ++u) CHECK(at::equal(loaded[u], trained[u]));
  fs::remove_all(dir);
}

TEST_CASE("Lora merge: the merged model computes what base + adapters compute", "[adapter][lora][io]") {
  RunConfig cfg = small_run();
  cfg.lr = 1e-2;
  cfg.lora_dropout = 0.0;
  cfg.lora_targets = "q_proj,v_proj,up_proj";
  cfg.max_steps = 3;
  cfg.merge_adapter = true;
  const fs::path dir = temp_dir("merge");
  cfg.save_dir = dir.string();
  Trainer<LoraFp32> t(cfg, quiet());
  t.run();
  REQUIRE(fs::is_regular_file(dir / "config.json"));
  RunConfig plain = small_run();
  plain.model_dir = dir.string();
  Trainer<Experiment<models::Llama, Fp32>> merged(plain, quiet());
  const at::Tensor tokens = at::randint(0, t.model_config().vocab_size, {2, 16}, at::kLong);
  const at::Tensor targets = at::randint(0, t.model_config().vocab_size, {2, 16}, at::kLong);
  at::NoGradGuard no_grad;
  const double with_adapters = t.forward(tokens, targets).item<double>();
  const double with_merged = merged.forward(tokens, targets).item<double>();
  CHECK(std::abs(with_adapters - with_merged) < 1e-5 * std::abs(with_adapters));
  // ... and differs from the base model alone (the adapters trained).
  Trainer<Experiment<models::Llama, Fp32>> base(small_run(), quiet());
  CHECK(std::abs(base.forward(tokens, targets).item<double>() - with_adapters) > 1e-5);
  fs::remove_all(dir);
}

TEST_CASE("Lora refuses bad adapter directories and targets with the fix", "[adapter][lora][config]") {
  const fs::path dir = temp_dir("bad");
  fs::create_directories(dir);
  RunConfig cfg = small_run();
  cfg.adapter = dir.string();
  std::ofstream(dir / "adapter_config.json") << R"({"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["q_proj"],"bias":"all"})";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(cfg, quiet()), Catch::Contains("bias") && Catch::Contains("none"));
  std::ofstream(dir / "adapter_config.json") << R"({"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["q_proj"]})";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(cfg, quiet()), Catch::Contains("adapter_model.safetensors"));
  std::ofstream(dir / "adapter_config.json") << R"({"peft_type":"LORA","r":4,"target_modules":["q_proj"],"use_dora":true})";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(cfg, quiet()), Catch::Contains("use_dora is true"));
  std::ofstream(dir / "adapter_config.json") << R"({"peft_type":"LORA","r":4,"target_modules":["q_proj"],"lora_bias":true})";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(cfg, quiet()), Catch::Contains("lora_bias is true"));
  std::ofstream(dir / "adapter_config.json")
      << R"({"peft_type":"LORA","r":4,"target_modules":["q_proj"],"modules_to_save":["lm_head"]})";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(cfg, quiet()), Catch::Contains("modules_to_save"));
  std::ofstream(dir / "adapter_config.json") << R"({"peft_type":"PREFIX_TUNING"})";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(cfg, quiet()), Catch::Contains("only LORA"));
  std::ofstream(dir / "adapter_config.json") << "{not json";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(cfg, quiet()), Catch::Contains("not valid JSON"));
  RunConfig targets = small_run();
  targets.lora_targets = "q_proj,qkv";
  CHECK_THROWS_WITH(Trainer<LoraFp32>(targets, quiet()),
                    Catch::Contains("'qkv'") && Catch::Contains("q_proj") && Catch::Contains("k_proj"));
  RunConfig missing = small_run();
  missing.adapter = (dir / "nope").string();
  CHECK_THROWS_WITH(validate(missing), Catch::Contains("adapter=") && Catch::Contains("adapter_config.json"));
  fs::remove_all(dir);
}

TEST_CASE("Lora memory: base + adapters in params, adapter-sized grads and optimizer state", "[adapter][lora][memory]") {
  Trainer<LoraFp32> t(small_run(), quiet());
  t.train_step(0);
  t.train_step(1);
  const std::int64_t adapters = t.params().param_bytes();
  const std::int64_t base = t.frozen_base()->bytes();
  std::int64_t dense = 0;
  for (const auto& s : t.frozen_base()->specs()) dense += 4 * s.numel();
  CHECK(base == dense);
  for (const auto& s : t.snapshots()) {
    INFO("step " << s.step << " " << memory::phase_label(s.phase));
    CHECK(s.owned.params == base + adapters);
    // Gradients exist for the adapters only, from backward to the optimizer step; AdamW's two moments too.
    CHECK(s.owned.grads == (s.phase == memory::Phase::after_backward ? adapters : 0));
    CHECK(s.owned.optim == (s.step == 0 && s.phase != memory::Phase::after_optimizer_step ? 0 : 2 * adapters));
  }
}
