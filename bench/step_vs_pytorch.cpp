// step_vs_pytorch: one training step of the same Llama (fp32, AdamW) in tessera and in PyTorch 2.11 eager running
// Hugging Face transformers' LlamaForCausalLM with one torch.optim.AdamW (bench/hf_step.py, in the project's .venv),
// same shapes, same thread count, measured in one run, alternating rounds so that both see the same machine state.
//
//   bench/step_vs_pytorch [model=tiny] [batch_size=8] [seq_len=256] [threads=0] [steps=5] [rounds=4]
// Last line: `ratio: X` = tessera median step time / PyTorch median step time (goal <= 1.0).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}


std::vector<double> pytorch_steps(const std::string& config, std::int64_t rows, std::int64_t seq_len,
                                  std::int64_t threads, std::int64_t steps) {
  const char* python = std::getenv("TESSERA_PYTHON");
  const std::string cmd = std::string(python ? python : TESSERA_DEFAULT_PYTHON) + " " + TESSERA_REFERENCE_SCRIPT +
                          " bench --config '" + config + "' --rows " + std::to_string(rows) + " --seq-len " +
                          std::to_string(seq_len) + " --threads " + std::to_string(threads) + " --steps " +
                          std::to_string(steps);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  if (pclose(pipe) != 0) throw std::runtime_error("PyTorch reference failed: " + cmd);
  return nlohmann::json::parse(out)["step_ms"].get<std::vector<double>>();
}

}  // namespace

int main(int argc, char** argv) {
  using Exp = tessera::Experiment<tessera::models::Llama, tessera::Fp32, tessera::AdamW>;
  std::int64_t steps = 5, rounds = 4;
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.rfind("steps=", 0) == 0) steps = std::stoll(std::string(a.substr(6)));
    else if (a.rfind("rounds=", 0) == 0) rounds = std::stoll(std::string(a.substr(7)));
    else args.push_back(a);
  }
  try {
    tessera::RunConfig cfg = tessera::parse_args(std::span<const std::string_view>(args), [] {
      tessera::RunConfig d;
      d.device = "cpu";
      return d;
    }());
    cfg.max_steps = steps + 1;
    tessera::validate(cfg);
    const auto threads = cfg.threads > 0 ? cfg.threads : static_cast<std::int64_t>(std::thread::hardware_concurrency());
    cfg.threads = threads;
    std::vector<double> ours_all, theirs_all;
    std::string config_json;
    for (std::int64_t round = 0; round < rounds; ++round) {
      tessera::Trainer<Exp> trainer(cfg, tessera::ReportOptions{false, 1});
      config_json = tessera::models::llama_config_json(trainer.model_config());
      trainer.train_step(0);  // warm-up: first-touch allocations, optimizer state
      for (std::int64_t s = 1; s <= steps; ++s) ours_all.push_back(trainer.train_step(s).step_ms);
      const auto theirs = pytorch_steps(config_json, cfg.batch_size, cfg.seq_len, threads, steps);
      theirs_all.insert(theirs_all.end(), theirs.begin(), theirs.end());
    }
    const double ours = median(ours_all), theirs = median(theirs_all);
    std::printf("model %s, batch %lld x seq %lld, %lld threads, %lld steps x %lld rounds each\n", cfg.model.c_str(),
                static_cast<long long>(cfg.batch_size), static_cast<long long>(cfg.seq_len),
                static_cast<long long>(threads), static_cast<long long>(steps), static_cast<long long>(rounds));
    std::printf("tessera  median step %.1f ms\n", ours);
    std::printf("pytorch  median step %.1f ms\n", theirs);
    std::printf("ratio: %.3f\n", ours / theirs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
