// tessera-demo: the main job on the embedded default. The tiny Llama trains on synthetic tokens under a few
// policies side by side, then the tiny BLIP-2 (OPT) on synthetic captioned images, fully and with the vision model
// and the language model frozen (the usual BLIP-2 recipe); each run first says which example binary and arguments
// run the same experiment alone, then prints its step lines and memory tables, and a final table compares time,
// throughput and memory. Takes the same key=value overrides as every example (--help).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/io/hub_cache.hpp"
#include "tessera/tessera.hpp"

namespace {

using namespace tessera;
using models::Llama;

struct Row {
  std::string label;
  double step_ms = 0;
  double tokens_per_s = 0;
  memory::MemorySnapshot after_fwd, after_bwd, after_opt;
};

std::string mib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// The step-1 snapshot of `phase` (step 0 still creates the optimizer state).
memory::MemorySnapshot at(const std::vector<memory::MemorySnapshot>& snaps, memory::Phase phase) {
  memory::MemorySnapshot found;
  for (const auto& s : snaps)
    if (s.step == 1 && s.micro == 0 && s.phase == phase) found = s;
  for (const auto& s : snaps)
    if (s.step == 1 && s.phase == phase && phase == memory::Phase::after_optimizer_step) found = s;
  return found;
}

// alone: the command that runs the same experiment by itself (an example binary and its arguments).
template <class Exp>
Row run(const RunConfig& cfg, const std::string& label, bool first, const std::string& alone) {
  std::printf("\n=== %s ===\nthe same run alone: %s\n", label.c_str(), alone.c_str());
  Trainer<Exp> trainer(cfg, ReportOptions{true, cfg.log_every, first});
  if (!first) std::printf("%s", trainer.describe().substr(trainer.describe().find("experiment\n")).c_str());
  const RunSummary summary = trainer.run();
  Row row{label};
  std::vector<double> ms;
  for (std::size_t s = 1; s < summary.steps.size(); ++s) ms.push_back(summary.steps[s].step_ms);
  std::sort(ms.begin(), ms.end());
  row.step_ms = ms.empty() ? 0.0 : ms[ms.size() / 2];
  row.tokens_per_s = row.step_ms > 0 ? static_cast<double>(trainer.tokens_per_step()) / (row.step_ms / 1000.0) : 0.0;
  row.after_fwd = at(trainer.snapshots(), memory::Phase::after_forward);
  row.after_bwd = at(trainer.snapshots(), memory::Phase::after_backward);
  row.after_opt = at(trainer.snapshots(), memory::Phase::after_optimizer_step);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  return exit_code_of([&] {
    RunConfig defaults;
    defaults.max_steps = 4;
    defaults.memory_every = 1000;
    if (wants_help(args)) {
      std::printf("usage: %s [key=value ...]\n\n%s", argv[0], config_help(defaults).c_str());
      return 0;
    }
    RunConfig cfg = parse_args(std::span<const std::string_view>(args), defaults);
    validate(cfg);
    cfg.model_dir = io::resolve_model_dir(cfg.model_dir, cfg.revision).string();  // a hub id: its snapshot
    // The example binary of a row with the demo's defaults and the user's overrides.
    std::string common = " max_steps=4 memory_every=1000";
    for (const std::string_view a : args) common.append(" ").append(a);
    const auto alone = [&](const char* binary) { return std::string("build/examples/") + binary + common; };
    std::vector<Row> rows;
    rows.push_back(run<Experiment<Llama, Fp32>>(cfg, "fp32 (32-true), AdamW", true, alone("llama-fp32")));
    rows.push_back(run<Experiment<Llama, Bf16Mixed>>(cfg, "bf16-mixed, AdamW", false, alone("llama-bf16mixed")));
    rows.push_back(run<Experiment<Llama, Bf16True>>(cfg, "bf16-true, AdamW", false, alone("llama-bf16true")));
    rows.push_back(run<Experiment<Llama, Fp32, CheckpointEveryBlock>>(cfg, "fp32 + checkpoint every block", false,
                                                                      alone("llama-fp32-ckpt")));
    rows.push_back(run<Experiment<Llama, Bf16True, Sgd>>(cfg, "bf16-true, SGD (no optimizer state)", false,
                                                         alone("llama-sgd-bf16true")));
    RunConfig blip2 = cfg;  // the same rows, steps and caption length; the tiny BLIP-2 unless model= says otherwise
    if (cfg.model == "tiny" && cfg.model_dir.empty()) {
      rows.push_back(run<Experiment<models::Blip2Opt, Fp32>>(blip2, "BLIP-2 (OPT) fp32, AdamW", false,
                                                             alone("blip2-opt-fp32")));
      blip2.freeze = "vision_model,language_model";
      rows.push_back(run<Experiment<models::Blip2Opt, Fp32>>(
          blip2, "BLIP-2 (OPT) fp32, vision+LM frozen", false,
          alone("blip2-opt-fp32") + " freeze=vision_model,language_model"));
    }

    std::printf("\nside by side (step 1; MiB; step time = median over steps after the first)\n");
    std::printf("%-38s %9s %9s %8s %8s %8s %12s %12s\n", "experiment", "step ms", "tok/s", "params", "grads",
                "optim", "acts@fwd", "peak@bwd");
    for (const auto& r : rows) {
      std::printf("%-38s %9.0f %9s %8s %8s %8s %12s %12s\n", r.label.c_str(), r.step_ms,
                  format_rate(r.tokens_per_s).c_str(), mib(r.after_opt.owned.params).c_str(),
                  mib(r.after_bwd.owned.grads).c_str(), mib(r.after_opt.owned.optim).c_str(),
                  mib(r.after_fwd.acts).c_str(), mib(r.after_bwd.allocator.peak).c_str());
    }
    return 0;
  });
}
