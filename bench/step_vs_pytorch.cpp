// step_vs_pytorch: one training step of the same Llama (fp32, AdamW lr 1e-4, weight decay 0.01) in tessera and in
// Hugging Face transformers' LlamaForCausalLM on PyTorch 2.11, run two ways as their users run it:
//   eager      one torch.optim.AdamW for the whole run, zero_grad(set_to_none=True) (bench/hf_step.py)
//   lightning  a lightning.pytorch Trainer, accelerator="cpu", devices=1 (bench/lightning_step.py)
// For each model size the bench writes one Hugging Face directory (config.json by tessera's writer, random weights
// and a token file by hf_step.py init); tessera trains it with model_dir= data= and the peers load it, so all three
// start from the same weights and read the same rows in the same order, on the same thread count. Rounds alternate
// (each round starts with the next side in turn) so that every side sees the same machine state. The first step of
// each run (first-touch allocations, AdamW's state) is not counted. The losses of the three must agree (same
// weights, same rows); the bench fails otherwise.
//
//   bench/step_vs_pytorch [sizes=tiny,small] [batch_size=8] [seq_len=256] [threads=0] [steps=3] [rounds=2]
//     sizes: a comma list of tessera presets and `small` (hidden 768, 12 layers, 12 heads, intermediate 2048,
//     vocab 32000: 134M parameters). Other keys are tessera's run-config keys.
// Per size: each side's median step (ms) and tessera/eager, tessera/lightning; the tensor peak of one steady step
// (tessera: its counting CPU allocator over the last step of a round; eager: torch.profiler's memory timeline of
// one more step, the same measure: bytes of live tensors, not the C allocator's cached pages) and tessera/eager.
// Last lines: `max_ratio: X` = the largest tessera median / peer median over all sizes and peers (goal <= 0.9 at
// 134M), `max_peak_ratio: Y` = the largest tessera peak / eager peak (goal <= 1.0).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "python_side.hpp"
#include "tessera/models/llama_config.hpp"
#include "tessera/tessera.hpp"

namespace {

namespace fs = std::filesystem;




struct Side {
  const char* name;
  std::vector<double> step_ms;  // every counted step of every round
  std::vector<double> loss;     // every step of the first round, warm-up included
  std::int64_t peak_bytes = 0;  // tensor peak of one steady step (highest over rounds)
};

double worst_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  using Exp = tessera::Experiment<tessera::models::Llama, tessera::Fp32, tessera::AdamW>;
  std::int64_t steps = 3, rounds = 2;
  std::vector<std::string> sizes{"tiny", "small"};
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.rfind("steps=", 0) == 0) steps = std::stoll(std::string(a.substr(6)));
    else if (a.rfind("rounds=", 0) == 0) rounds = std::stoll(std::string(a.substr(7)));
    else if (a.rfind("sizes=", 0) == 0) {
      sizes.clear();
      std::string list(a.substr(6));
      for (std::size_t p = 0; p <= list.size();) {
        const std::size_t q = std::min(list.find(',', p), list.size());
        if (q > p) sizes.push_back(list.substr(p, q - p));
        p = q + 1;
      }
    } else if (a.rfind("model=", 0) == 0 || a.rfind("model_dir=", 0) == 0 || a.rfind("data=", 0) == 0) {
      std::fprintf(stderr, "error: %s: the bench makes each model's directory and tokens itself; "
                           "choose models with sizes=tiny,small (or tessera preset names)\n", argv[i]);
      return 2;
    } else args.push_back(a);
  }
  for (const std::string& size : sizes) {
    const auto presets = tessera::models::llama_preset_names();
    if (size != "small" && std::find(presets.begin(), presets.end(), size) == presets.end()) {
      std::string names = "small";
      for (const std::string_view p : presets) names += ", " + std::string(p);
      std::fprintf(stderr, "error: sizes: \"%s\" is no size; choose from %s\n", size.c_str(), names.c_str());
      return 2;
    }
  }
  if (steps < 1 || rounds < 1 || sizes.empty()) {
    std::fprintf(stderr, "error: steps=%lld rounds=%lld sizes=(%zu names): each must be at least 1\n",
                 static_cast<long long>(steps), static_cast<long long>(rounds), sizes.size());
    return 2;
  }
  try {
    tessera::RunConfig base = bench::step_config(std::span<const std::string_view>(args), steps);
    const std::int64_t threads = base.threads;
    const std::string shape = " --rows " + std::to_string(base.batch_size) + " --seq-len " +
                              std::to_string(base.seq_len) + " --threads " + std::to_string(threads) + " --steps " +
                              std::to_string(steps) + " --warmup 1";
    double max_ratio = 0.0, max_peak_ratio = 0.0;
    for (const std::string& size : sizes) {
      const tessera::models::LlamaConfig model =
          size == "small" ? bench::small_llama() : tessera::models::llama_preset(size);
      bench::TempDir dir("step-bench");
      tessera::models::write_llama_config(dir.path / "config.json", model, "float32");
      // Exactly steps + 1 chunks of batch_size x seq_len + 1 tokens: one epoch is the whole run.
      const std::int64_t tokens = base.batch_size * base.seq_len * (steps + 1) + 1;
      bench::run_python(bench::build_paths::script("hf_step.py"),
                        "init --dir '" + dir.path.string() + "' --tokens " + std::to_string(tokens));
      tessera::RunConfig cfg = base;
      cfg.model_dir = dir.path.string();
      cfg.data = (dir.path / "tokens.bin").string();
      tessera::validate(cfg);
      const std::string peer_args = "bench --dir '" + dir.path.string() + "'" + shape;

      std::vector<Side> sides{{"tessera", {}, {}}, {"transformers eager", {}, {}}, {"transformers lightning", {}, {}}};
      for (std::int64_t round = 0; round < rounds; ++round) {
        for (std::size_t k = 0; k < sides.size(); ++k) {
          const std::size_t who = (static_cast<std::size_t>(round) + k) % sides.size();
          Side& side = sides[who];
          std::vector<double> loss;
          if (who == 0) {
            tessera::Trainer<Exp> trainer(cfg, tessera::ReportOptions{false, 1});
            loss.push_back(trainer.train_step(0).loss);  // warm-up: first-touch allocations, optimizer state
            for (std::int64_t s = 1; s <= steps; ++s) {
              if (s == steps) tessera::memory::reset_peak(trainer.runtime().device);
              const tessera::StepResult r = trainer.train_step(s);
              side.step_ms.push_back(r.step_ms);
              loss.push_back(r.loss);
            }
            side.peak_bytes = std::max(side.peak_bytes, tessera::memory::allocator_stats(trainer.runtime().device).peak);
          } else {
            const nlohmann::json out = bench::run_python(
                bench::build_paths::script(who == 1 ? "hf_step.py" : "lightning_step.py"), peer_args);
            if (out.value("threads", std::int64_t{0}) != threads)
              throw std::runtime_error(std::string(side.name) + " ran on " +
                                       out.value("threads", nlohmann::json()).dump() + " threads, not " +
                                       std::to_string(threads));
            const auto ms = out.at("step_ms").get<std::vector<double>>();
            side.step_ms.insert(side.step_ms.end(), ms.begin(), ms.end());
            loss = out.at("loss").get<std::vector<double>>();
            side.peak_bytes = std::max(side.peak_bytes, out.value("peak_bytes", std::int64_t{0}));
          }
          if (round == 0) side.loss = loss;
        }
      }
      // Same weights and rows: the losses agree to fp32 rounding (the reference checks hold tessera to 1e-5
      // relative). At initialisation every loss is close to ln(vocab), and other weights or rows move it by
      // about 1e-3 relative: a gap that wide means the sides did not train the same thing, and the times say
      // nothing.
      double worst = 0.0;
      for (std::size_t k = 1; k < sides.size(); ++k)
        worst = std::max(worst, worst_rel_diff(sides[0].loss, sides[k].loss));
      if (!(worst < 1e-5))
        throw std::runtime_error("size " + size + ": the losses differ by " + std::to_string(worst) +
                                 " relative; the sides did not train the same model on the same rows");

      const double ours = bench::median(sides[0].step_ms);
      std::printf("size %s: %.1fM parameters (hidden %lld, %lld layers, vocab %lld), batch %lld x seq %lld, "
                  "%lld threads, %lld steps x %lld rounds each\n"
                  "  first loss %.6f on every side, all losses within %.1e relative\n",
                  size.c_str(), static_cast<double>(model.parameter_count()) / 1e6,
                  static_cast<long long>(model.hidden_size), static_cast<long long>(model.num_hidden_layers),
                  static_cast<long long>(model.vocab_size), static_cast<long long>(cfg.batch_size),
                  static_cast<long long>(cfg.seq_len), static_cast<long long>(threads),
                  static_cast<long long>(steps), static_cast<long long>(rounds), sides[0].loss.front(), worst);
      std::printf("  %-24s median step %8.1f ms\n", sides[0].name, ours);
      for (std::size_t k = 1; k < sides.size(); ++k) {
        const double theirs = bench::median(sides[k].step_ms), ratio = ours / theirs;
        max_ratio = std::max(max_ratio, ratio);
        std::printf("  %-24s median step %8.1f ms   tessera/%s %.3f\n", sides[k].name, theirs,
                    k == 1 ? "eager" : "lightning", ratio);
      }
      const double peak_ratio = static_cast<double>(sides[0].peak_bytes) / static_cast<double>(sides[1].peak_bytes);
      max_peak_ratio = std::max(max_peak_ratio, peak_ratio);
      std::printf("  tensor peak of one step: tessera %.1f MiB (%lld B), transformers eager %.1f MiB (%lld B)   "
                  "tessera/eager %.3f\n",
                  static_cast<double>(sides[0].peak_bytes) / 1048576.0, static_cast<long long>(sides[0].peak_bytes),
                  static_cast<double>(sides[1].peak_bytes) / 1048576.0, static_cast<long long>(sides[1].peak_bytes),
                  peak_ratio);
      std::fflush(stdout);
    }
    std::printf("max_ratio: %.3f\nmax_peak_ratio: %.3f\n", max_ratio, max_peak_ratio);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
