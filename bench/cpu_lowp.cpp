// cpu_lowp: what 16-bit training costs on this CPU. One training step of the same Llama (AdamW lr 1e-4, weight decay
// 0.01) on the same rows, side by side in alternating rounds:
//   tessera    32-true; bf16-true and bf16-mixed with cpu_lowp=widen and with cpu_lowp=native
//   transformers eager (bench/hf_step.py): LlamaForCausalLM in bf16-true (model and AdamW in bf16) and bf16-mixed
//              (fp32 weights, forward under torch.autocast), as Lightning's precision plugins run them
// For each size the bench writes one Hugging Face directory (random weights, a token file) that every side trains
// from. The first step of each run is a warm-up and not counted; each side's median step is printed. Rounds
// alternate (each starts with the next side in turn) so that every side sees the same machine state.
//
//   bench/cpu_lowp [sizes=tiny,small] [batch_size=8] [seq_len=256] [small_batch_size=2] [small_seq_len=128]
//                  [threads=0] [steps=2] [rounds=2] [native=yes|no] [hf=yes|no]
//     sizes: tessera Llama presets and `small` (hidden 768, 12 layers, vocab 32000: 134M parameters, the size of
//     bench/step_vs_pytorch), which runs at small_batch_size x small_seq_len: a 16-bit step without fast 16-bit
//     GEMMs takes minutes at the tiny model's shape. native=no and hf=no leave those sides out (they are the slow
//     ones on such a CPU).
// Printed first: the CPU (lscpu's model name, its 16-bit flags), LibTorch's kernel level (ATen capability,
// ONEDNN_MAX_CPU_ISA) and what cpu_lowp=auto picks for bf16 here. Per size: every side's median and, per
// precision, widen/fp32, native/fp32 and transformers/tessera (tessera with cpu_lowp=auto).
// Last lines: `max_auto_over_fp32: X` = the largest auto bf16 step / fp32 step over sizes and precisions (goal <= 1.1
// where the CPU lacks 16-bit GEMMs), `min_hf_over_auto: Y` = the smallest transformers bf16 step / tessera auto
// bf16 step (goal >= 10 there).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "python_side.hpp"
#include "tessera/models/llama_config.hpp"
#include "tessera/ops/cpu_lowp.hpp"
#include "tessera/tessera.hpp"

namespace {

namespace fs = std::filesystem;




// /proc/cpuinfo's model name and which of the 16-bit flags it lists.
std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU", flags;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && model == "unknown CPU") model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0 && flags.empty()) flags = " " + line.substr(line.find(':') + 1) + " ";
  }
  std::string listed;
  for (const char* f : {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16"})
    listed += std::string(" ") + f + (flags.find(std::string(" ") + f + " ") != std::string::npos ? "+" : "-");
  return model + " (" + listed.substr(1) + ")";
}

enum class Who { tessera, hf };
struct Side {
  std::string name;
  Who who;
  std::string precision;  // 32-true, bf16-true, bf16-mixed
  tessera::CpuLowp lowp = tessera::CpuLowp::auto_;
  std::vector<double> step_ms, loss;
};

template <class Exp>
std::vector<double> tessera_steps(tessera::RunConfig cfg, tessera::CpuLowp lowp, std::int64_t steps,
                                  std::vector<double>& step_ms) {
  cfg.cpu_lowp = lowp;
  tessera::Trainer<Exp> trainer(cfg, tessera::ReportOptions{false, 1});
  std::vector<double> loss{trainer.train_step(0).loss};  // warm-up: first-touch allocations, optimizer state
  for (std::int64_t s = 1; s <= steps; ++s) {
    const tessera::StepResult r = trainer.train_step(s);
    step_ms.push_back(r.step_ms);
    loss.push_back(r.loss);
  }
  return loss;
}

std::vector<double> run_side(Side& side, const tessera::RunConfig& cfg, std::int64_t steps, const std::string& peer) {
  using namespace tessera;
  if (side.who == Who::hf) {
    const nlohmann::json out =
        bench::run_python(bench::build_paths::script("hf_step.py"), peer + " --precision " + side.precision);
    const auto ms = out.at("step_ms").get<std::vector<double>>();
    side.step_ms.insert(side.step_ms.end(), ms.begin(), ms.end());
    return out.at("loss").get<std::vector<double>>();
  }
  if (side.precision == "32-true")
    return tessera_steps<Experiment<models::Llama, Fp32, AdamW>>(cfg, side.lowp, steps, side.step_ms);
  if (side.precision == "bf16-true")
    return tessera_steps<Experiment<models::Llama, Bf16True, AdamW>>(cfg, side.lowp, steps, side.step_ms);
  return tessera_steps<Experiment<models::Llama, Bf16Mixed, AdamW>>(cfg, side.lowp, steps, side.step_ms);
}

const Side* find(const std::vector<Side>& sides, Who who, const std::string& precision,
                 std::optional<tessera::CpuLowp> lowp = std::nullopt) {
  for (const Side& s : sides)
    if (s.who == who && s.precision == precision && (!lowp || s.lowp == *lowp)) return &s;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t steps = 2, rounds = 2, small_batch = 2, small_seq = 128;
  bool with_native = true, with_hf = true;
  std::vector<std::string> sizes{"tiny", "small"};
  std::vector<std::string_view> args;
  auto yes_no = [](std::string_view v, const char* key) {
    if (v == "yes") return true;
    if (v == "no") return false;
    throw std::invalid_argument(std::string(key) + "=" + std::string(v) + ": must be yes or no");
  };
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      const auto value = [&](std::size_t n) { return std::string(a.substr(n)); };
      if (a.rfind("steps=", 0) == 0) steps = std::stoll(value(6));
      else if (a.rfind("rounds=", 0) == 0) rounds = std::stoll(value(7));
      else if (a.rfind("small_batch_size=", 0) == 0) small_batch = std::stoll(value(17));
      else if (a.rfind("small_seq_len=", 0) == 0) small_seq = std::stoll(value(14));
      else if (a.rfind("native=", 0) == 0) with_native = yes_no(a.substr(7), "native");
      else if (a.rfind("hf=", 0) == 0) with_hf = yes_no(a.substr(3), "hf");
      else if (a.rfind("sizes=", 0) == 0) {
        sizes.clear();
        const std::string list = value(6);
        for (std::size_t p = 0; p <= list.size();) {
          const std::size_t q = std::min(list.find(',', p), list.size());
          if (q > p) sizes.push_back(list.substr(p, q - p));
          p = q + 1;
        }
      } else if (a.rfind("model=", 0) == 0 || a.rfind("model_dir=", 0) == 0 || a.rfind("data=", 0) == 0 ||
                 a.rfind("cpu_lowp=", 0) == 0) {
        std::fprintf(stderr, "error: %s: the bench sets this itself (sizes= picks the models; every side runs "
                             "its own cpu_lowp)\n", argv[i]);
        return 2;
      } else args.push_back(a);
    }
    if (steps < 1 || rounds < 1 || small_batch < 1 || small_seq < 2 || sizes.empty())
      throw std::invalid_argument("steps, rounds, small_batch_size must be at least 1, small_seq_len at least 2, "
                                  "sizes not empty");
    for (const std::string& size : sizes) {
      const auto presets = tessera::models::llama_preset_names();
      if (size != "small" && std::find(presets.begin(), presets.end(), size) == presets.end())
        throw std::invalid_argument("sizes: \"" + size + "\" is no size; use small or a Llama preset");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  try {
    tessera::RunConfig base = bench::step_config(std::span<const std::string_view>(args), steps);
    base.memory_every = 1000000;  // the steps' own time: no snapshots past step 1 (both sides print none)
    base.predict = false;
    const std::int64_t threads = base.threads;
    const tessera::ops::CpuLowpSupport bf16 = tessera::ops::cpu_lowp_support(at::kBFloat16);
    const char* onednn = std::getenv("ONEDNN_MAX_CPU_ISA");
    std::printf("cpu: %s\nLibTorch kernels: ATen %s, ONEDNN_MAX_CPU_ISA=%s; cpu_lowp=auto for bf16: %s (%s)\n",
                cpu_description().c_str(), at::get_cpu_capability().c_str(), onednn ? onednn : "(unset)",
                bf16.native ? "native" : "widen", bf16.reason.c_str());
    const tessera::CpuLowp auto_path = bf16.native ? tessera::CpuLowp::native : tessera::CpuLowp::widen;

    double max_auto_over_fp32 = 0.0, min_hf_over_auto = INFINITY;
    for (const std::string& size : sizes) {
      const tessera::models::LlamaConfig model =
          size == "small" ? bench::small_llama() : tessera::models::llama_preset(size);
      tessera::RunConfig cfg = base;
      if (size == "small") {
        cfg.batch_size = small_batch;
        cfg.seq_len = small_seq;
      }
      bench::TempDir dir("lowp-bench");
      tessera::models::write_llama_config(dir.path / "config.json", model, "float32");
      const std::int64_t tokens = cfg.batch_size * cfg.seq_len * (steps + 1) + 1;
      bench::run_python(bench::build_paths::script("hf_step.py"),
                        "init --dir '" + dir.path.string() + "' --tokens " + std::to_string(tokens));
      cfg.model_dir = dir.path.string();
      cfg.data = (dir.path / "tokens.bin").string();
      tessera::validate(cfg);
      const std::string peer = "bench --no-peak --dir '" + dir.path.string() + "' --rows " +
                               std::to_string(cfg.batch_size) + " --seq-len " + std::to_string(cfg.seq_len) +
                               " --threads " + std::to_string(threads) + " --steps " + std::to_string(steps) +
                               " --warmup 1";

      using tessera::CpuLowp;
      std::vector<Side> sides{{"tessera 32-true", Who::tessera, "32-true"}};
      for (const char* p : {"bf16-true", "bf16-mixed"}) {
        sides.push_back({std::string("tessera ") + p + " widen", Who::tessera, p, CpuLowp::widen});
        if (with_native) sides.push_back({std::string("tessera ") + p + " native", Who::tessera, p, CpuLowp::native});
        if (with_hf) sides.push_back({std::string("transformers ") + p, Who::hf, p});
      }
      for (std::int64_t round = 0; round < rounds; ++round)
        for (std::size_t k = 0; k < sides.size(); ++k) {
          Side& side = sides[(static_cast<std::size_t>(round) + k) % sides.size()];
          std::vector<double> loss = run_side(side, cfg, steps, peer);
          if (side.loss.empty()) side.loss = std::move(loss);
        }

      std::printf("size %s: %.1fM parameters, batch %lld x seq %lld, %lld threads, %lld steps x %lld rounds each\n",
                  size.c_str(), static_cast<double>(model.parameter_count()) / 1e6,
                  static_cast<long long>(cfg.batch_size), static_cast<long long>(cfg.seq_len),
                  static_cast<long long>(threads), static_cast<long long>(steps), static_cast<long long>(rounds));
      const double fp32 = bench::median(sides[0].step_ms);
      for (const Side& s : sides) {
        // Same weights and rows: every side's first loss is near ln(vocab), within 16-bit rounding of fp32's.
        const double gap = std::abs(s.loss.front() - sides[0].loss.front()) / sides[0].loss.front();
        if (!(gap < 1e-2))
          throw std::runtime_error(s.name + ": first loss " + std::to_string(s.loss.front()) + " against fp32's " +
                                   std::to_string(sides[0].loss.front()) + "; the sides did not train the same thing");
        std::printf("  %-28s median step %9.1f ms   /fp32 %6.2f   first loss %.5f\n", s.name.c_str(),
                    bench::median(s.step_ms), bench::median(s.step_ms) / fp32, s.loss.front());
      }
      for (const char* p : {"bf16-true", "bf16-mixed"}) {
        const Side* automatic = find(sides, Who::tessera, p, auto_path);
        if (!automatic) continue;  // native=no on a CPU whose auto path is native
        const double ours = bench::median(automatic->step_ms);
        max_auto_over_fp32 = std::max(max_auto_over_fp32, ours / fp32);
        std::printf("  %s: tessera (cpu_lowp=auto: %s) / tessera 32-true %.3f", p,
                    auto_path == CpuLowp::native ? "native" : "widen", ours / fp32);
        if (const Side* hf = find(sides, Who::hf, p)) {
          const double ratio = bench::median(hf->step_ms) / ours;
          min_hf_over_auto = std::min(min_hf_over_auto, ratio);
          std::printf("   transformers / tessera %.1f", ratio);
        }
        const Side* widened = find(sides, Who::tessera, p, CpuLowp::widen);
        const Side* native = find(sides, Who::tessera, p, CpuLowp::native);
        if (widened && native)
          std::printf("   native / widen %.2f", bench::median(native->step_ms) / bench::median(widened->step_ms));
        std::printf("\n");
      }
      std::fflush(stdout);
    }
    std::printf("max_auto_over_fp32: %.3f\n", max_auto_over_fp32);
    if (std::isfinite(min_hf_over_auto)) std::printf("min_hf_over_auto: %.1f\n", min_hf_over_auto);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
