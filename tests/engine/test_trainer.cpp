// The single-process engine: accumulation parity, activation checkpointing parity and memory, and the
// byte accounting of parameters, gradients and optimizer state for every precision.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support.hpp"
#include "tessera/tessera.hpp"

using namespace tessera;
using testing::max_rel_diff;
using testing::quiet;
using testing::small_run;

namespace {

template <class Exp>
std::vector<at::Tensor> train_params(const RunConfig& cfg, std::int64_t steps) {
  Trainer<Exp> t(cfg, quiet());
  for (std::int64_t s = 0; s < steps; ++s) t.train_step(s);
  std::vector<at::Tensor> flats;
  for (std::size_t u = 0; u < t.params().num_units(); ++u) flats.push_back(t.params().flat_param(u).detach().clone());
  return flats;
}

template <class Exp>
std::vector<at::Tensor> first_step_grads(Trainer<Exp>& t) {
  t.accumulate_gradients(0);
  std::vector<at::Tensor> grads;
  for (std::size_t u = 0; u < t.params().num_units(); ++u) grads.push_back(t.flat_grad(u).clone());
  return grads;
}

// Bytes allocated while forward runs and its graph is alive: activations plus the loss.
template <class Exp>
std::int64_t forward_bytes(const RunConfig& cfg) {
  Trainer<Exp> t(cfg, quiet());
  at::Tensor tokens = at::randint(0, 4096, {cfg.batch_size, cfg.seq_len}, at::kLong);
  const auto before = memory::allocator_stats(c10::Device("cpu")).allocated;
  at::Tensor loss = t.forward(tokens, tokens);
  return memory::allocator_stats(c10::Device("cpu")).allocated - before;
}

using Fp32Exp = Experiment<models::Llama, Fp32>;
using CkptExp = Experiment<models::Llama, Fp32, CheckpointEveryBlock>;
using Ckpt2Exp = Experiment<models::Llama, Fp32, CheckpointEveryNth<2>>;

}  // namespace

TEST_CASE("gradient accumulation: 8 rows x 1 equals 4 rows x 2 (fp32)", "[engine]") {
  // The gradients themselves agree to float32 rounding (GEMMs of 8 and of 4 rows round differently).
  Trainer<Fp32Exp> one(small_run(8, 1), quiet()), two(small_run(4, 2), quiet());
  const auto g_one = first_step_grads(one), g_two = first_step_grads(two);
  for (std::size_t u = 0; u < g_one.size(); ++u) CHECK(testing::rel_norm_diff(g_two[u], g_one[u]) < 2e-6);

  // Parameters after three AdamW steps. Adam's first update is lr * sign(g) element-wise, so elements whose
  // gradient is at rounding level may move by +-lr in one run and -+lr in the other; the difference scales with
  // lr, so the check runs at lr = 1e-4 (the parameters still move by ~3e-4 per element).
  RunConfig whole_cfg = small_run(8, 1), accumulated_cfg = small_run(4, 2);
  whole_cfg.lr = accumulated_cfg.lr = 1e-4;
  const auto whole = train_params<Fp32Exp>(whole_cfg, 3);
  const auto accumulated = train_params<Fp32Exp>(accumulated_cfg, 3);
  REQUIRE(whole.size() == accumulated.size());
  Trainer<Fp32Exp> untouched(whole_cfg, quiet());
  for (std::size_t u = 0; u < whole.size(); ++u) {
    CHECK(testing::rel_norm_diff(accumulated[u], whole[u]) < 1e-5);
    // ... and the comparison is not between two untouched initialisations.
    CHECK(testing::rel_norm_diff(whole[u], untouched.params().flat_param(u)) > 1e-3);
  }
}

TEST_CASE("activation checkpointing: same gradients, less forward memory", "[engine][checkpoint]") {
  const RunConfig cfg = small_run(4, 1, 64);
  Trainer<Fp32Exp> plain(cfg, quiet());
  Trainer<CkptExp> every(cfg, quiet());
  Trainer<Ckpt2Exp> every_other(cfg, quiet());
  const auto g_plain = first_step_grads(plain);
  const auto g_every = first_step_grads(every);
  const auto g_other = first_step_grads(every_other);
  for (std::size_t u = 0; u < g_plain.size(); ++u) {
    CHECK(max_rel_diff(g_every[u], g_plain[u]) < 1e-6);
    CHECK(max_rel_diff(g_other[u], g_plain[u]) < 1e-6);
  }
  const auto plain_bytes = forward_bytes<Fp32Exp>(cfg);
  const auto every_bytes = forward_bytes<CkptExp>(cfg);
  const auto other_bytes = forward_bytes<Ckpt2Exp>(cfg);
  INFO("forward bytes: none " << plain_bytes << ", every 2nd " << other_bytes << ", every block " << every_bytes);
  CHECK(every_bytes < other_bytes);
  CHECK(other_bytes < plain_bytes);
  // Checkpointing every block keeps the block inputs only: under half of what the blocks keep without it (2.7x less
  // on this config; the norm and MLP nodes of ops/fused.hpp and ops/norm_linear.hpp already keep only their inputs).
  CHECK(every_bytes * 2 < plain_bytes);
}

TEMPLATE_TEST_CASE("memory accounting equals the analytic byte sums", "[engine][memory]",
                   (Experiment<models::Llama, Fp32>), (Experiment<models::Llama, Bf16True>),
                   (Experiment<models::Llama, Bf16Mixed>), (Experiment<models::Llama, Fp32, Sgd>)) {
  using Precision = typename TestType::precision;
  using Optimizer = typename TestType::optimizer;
  Trainer<TestType> t(small_run(), quiet());
  const std::int64_t n = t.model_config().parameter_count();
  const std::int64_t param_size = c10::elementSize(Precision::param_dtype);
  const std::int64_t state_size = c10::elementSize(Precision::optim_state_dtype);
  const std::int64_t state_tensors = std::is_same_v<Optimizer, AdamW> ? 2 : 0;

  CHECK(t.params().numel() == n);
  CHECK(t.params().param_bytes() == n * param_size);
  CHECK(t.engine().grad_bytes() == 0);
  CHECK(t.optimizer_bytes() == 0);
  t.accumulate_gradients(0);
  CHECK(t.engine().grad_bytes() == n * param_size);
  const auto allocated = memory::allocator_stats(c10::Device("cpu")).allocated;
  CHECK(allocated >= t.params().param_bytes() + t.engine().grad_bytes());
  t.apply_gradients();
  CHECK(t.engine().grad_bytes() == 0);
  CHECK(t.optimizer_bytes() == n * state_size * state_tensors);
}

TEST_CASE("the metrics file holds every phase with acts = allocated - params - grads - optim", "[engine][report]") {
  const auto path = std::filesystem::temp_directory_path() / ("tessera-metrics-" + std::to_string(::getpid()) + ".jsonl");
  RunConfig cfg = small_run(2, 2);
  cfg.max_steps = 2;
  cfg.metrics = path.string();
  Trainer<Fp32Exp>(cfg, quiet()).run();
  std::ifstream in(path);
  std::map<std::string, int> phases;
  int steps = 0, done = 0, runs = 0, line_no = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    ++line_no;
    if (j["event"] == "run") {
      ++runs;
      CHECK(line_no == 1);  // the report reads the experiment before anything else
      CHECK(j["family"] == "llama");
      CHECK(j["precision"] == "32-true");
      CHECK(j["sharding"] == "none");
      CHECK(j["world_size"] == 1);
      CHECK(j["batch_size"] == 2);
      CHECK(j["accumulate_grad_batches"] == 2);
      CHECK(j["tokens_per_step"] == 2 * 2 * 32);
    } else if (j["event"] == "step") {
      ++steps;
      CHECK(j["tokens"] == 2 * 2 * 32);
      CHECK(std::isfinite(j["loss"].get<double>()));
    } else if (j["event"] == "memory") {
      ++phases[j["phase"]];
      CHECK(j["acts"].get<std::int64_t>() == j["allocated"].get<std::int64_t>() - j["params"].get<std::int64_t>() -
                                                j["grads"].get<std::int64_t>() - j["optim"].get<std::int64_t>());
      CHECK(j["peak"].get<std::int64_t>() >= j["allocated"].get<std::int64_t>());
      CHECK(j["rank"] == 0);
    } else if (j["event"] == "done") {
      ++done;
      CHECK(j["peak"].get<std::int64_t>() > 0);
    }
  }
  std::filesystem::remove(path);
  CHECK(steps == 2);
  CHECK(done == 1);
  CHECK(runs == 1);
  // Steps 0 and 1 are snapshotted: 2 micro-steps x 3 phases + after_opt, per step.
  CHECK(phases["before_fwd"] == 4);
  CHECK(phases["after_fwd"] == 4);
  CHECK(phases["after_bwd"] == 4);
  CHECK(phases["after_opt"] == 2);
}

TEST_CASE("a run whose loss turns non-finite stops at that step and leaves no outputs", "[engine]") {
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-diverge-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  RunConfig cfg = small_run(2);
  cfg.lr = 1e30;  // AdamW moves every weight by about lr at the first step
  cfg.max_steps = 6;
  cfg.save_dir = (dir / "out").string();
  cfg.metrics = (dir / "m.jsonl").string();
  {
    Trainer<Fp32Exp> t(cfg, quiet());
    CHECK_THROWS_WITH(t.run(), Catch::Matches("step [2-6]: the loss is (NaN|[+-]Inf); training diverged .*lr=1e\\+30.*"));
  }
  CHECK(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}
