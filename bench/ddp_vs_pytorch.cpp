// ddp_vs_pytorch: one data-parallel training step of the same Llama (fp32, AdamW lr 1e-3) at 2 ranks, in tessera
// and in PyTorch as its users run it, pair by pair:
//   tessera Ddp       (llama-ddp-fp32 under mpiexec -n 2)  against torch DistributedDataParallel
//   tessera FullShard (llama-fsdp-fp32 under mpiexec -n 2) against torch FSDP2 (fully_shard per decoder layer and root)
// The PyTorch side is bench/ddp_reference.py: transformers' LlamaForCausalLM (sdpa attention) over gloo, 2 processes,
// with the project's .venv (torch 2.11); same rows per rank, seq_len and 1 CPU thread per rank on both sides. The
// weights are each side's own random initialization of the same shapes, so loss@1 differs in the 4th digit; that the
// two train identically from the same weights is what the reference.sharding.* tests check.
// A plain driver, not an MPI program: it starts the four sides as child processes, alternating them round by round
// (tessera Ddp, torch DDP, tessera FullShard, torch FSDP2) so that all see the same machine state.
//
//   bench/ddp_vs_pytorch [model=tiny] [batch_size=4] [seq_len=128] [steps=5] [rounds=2]
//
// Each side runs steps+1 steps per round; step 0 (first-touch allocations, optimizer state) is not counted.
// tessera's step time is rank 0's (metrics file, step_ms); PyTorch's is rank 0's after a barrier. A side's
// figure is the median over rounds of each round's median step (upper middle for even counts, as
// bench/step_vs_pytorch). The children's mpiexec runs with --bind-to none, as the PyTorch ranks are unbound.
// Environment: TESSERA_PYTHON overrides the build's TESSERA_TORCH_PYTHON. Children get OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1
// and OMP_NUM_THREADS=1.
// Last line: `ratio: X` = the larger of (tessera Ddp / torch DDP) and (tessera FullShard / torch FSDP2) median step
// times (goal <= 1.0).
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "build_paths.hpp"
#include "tessera/models/llama_config.hpp"

namespace {

constexpr int kWorld = 2;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}


// Runs `cmd` through the shell, stdout and stderr together; throws naming `who` and the command on failure.
std::string run(const std::string& who, const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error(who + ": cannot start: " + cmd);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  const int status = pclose(pipe);
  if (status != 0) {
    const std::string how = status == -1            ? "could not be waited for"
                            : WIFEXITED(status)     ? "exited with status " + std::to_string(WEXITSTATUS(status))
                            : WIFSIGNALED(status)   ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                                    : "failed (status " + std::to_string(status) + ")";
    const std::string tail = out.size() > 4000 ? "...\n" + out.substr(out.size() - 4000) : out;
    throw std::runtime_error(who + " " + how + "\n  command: " + cmd + "\n  its output:\n" + tail);
  }
  return out;
}

struct Round {
  std::vector<double> step_ms;  // the measured steps (warm-up excluded)
  std::optional<double> loss1;  // loss of the first measured step (step 1 of the run)
};

struct Args {
  std::string model = "tiny";
  std::int64_t batch_size = 4, seq_len = 128, steps = 5, rounds = 2;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const auto eq = s.find('=');
    const std::string key = s.substr(0, eq), value = eq == std::string::npos ? "" : s.substr(eq + 1);
    auto number = [&](std::int64_t& out) {
      std::size_t used = 0;
      try {
        out = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != value.size() || out < 1)
        throw std::invalid_argument(s + ": " + key + " must be an integer >= 1");
    };
    if (eq == std::string::npos) throw std::invalid_argument(s + ": arguments are key=value");
    if (key == "model") a.model = value;
    else if (key == "batch_size") number(a.batch_size);
    else if (key == "seq_len") number(a.seq_len);
    else if (key == "steps") number(a.steps);
    else if (key == "rounds") number(a.rounds);
    else throw std::invalid_argument(s + ": unknown key; keys are model, batch_size, seq_len, steps, rounds");
  }
  if (a.seq_len < 2) throw std::invalid_argument("seq_len must be >= 2");
  return a;
}

class Bench {
 public:
  Bench(Args a, std::filesystem::path dir) : a_(std::move(a)), dir_(std::move(dir)) {}

  // One round of a tessera example binary under mpiexec, read back from its metrics file.
  Round tessera(const std::string& who, const std::string& binary) {
    const std::filesystem::path metrics = dir_ / "metrics.jsonl";
    std::filesystem::remove(metrics);
    const std::string cmd = quote(bench::build_paths::mpiexec()) + " -n " + std::to_string(kWorld) +
                            " --oversubscribe --bind-to none " + quote(binary) + " model=" + quote(a_.model) +
                            " batch_size=" + std::to_string(a_.batch_size) + " seq_len=" + std::to_string(a_.seq_len) +
                            " threads=1 max_steps=" + std::to_string(a_.steps + 1) +
                            " memory_every=1000000 metrics=" + quote(metrics.string());
    run(who, cmd);
    std::ifstream in(metrics);
    if (!in) throw std::runtime_error(who + " wrote no metrics file " + metrics.string() + "\n  command: " + cmd);
    Round r;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      if (j.value("event", "") != "step" || j.at("step").get<std::int64_t>() < 1) continue;
      r.step_ms.push_back(j.at("step_ms").get<double>());
      if (j.at("step").get<std::int64_t>() == 1) r.loss1 = j.at("loss").get<double>();
    }
    if (static_cast<std::int64_t>(r.step_ms.size()) != a_.steps)
      throw std::runtime_error(who + ": metrics file has " + std::to_string(r.step_ms.size()) + " measured steps, not " +
                               std::to_string(a_.steps) + "\n  command: " + cmd);
    return r;
  }

  // One round of bench/ddp_reference.py over gloo; policy is "ddp" (DistributedDataParallel) or "fsdp" (FSDP2).
  Round pytorch(const std::string& who, const std::string& policy, const std::string& config) {
    const std::string script = bench::build_paths::script("ddp_reference.py");
    const std::string cmd = quote(bench::build_paths::python()) + " " + quote(script) +
                            " --policy " + policy + " --config " + quote(config) + " --world " + std::to_string(kWorld) + " --rows " +
                            std::to_string(a_.batch_size) + " --seq-len " + std::to_string(a_.seq_len) +
                            " --threads 1 --steps " + std::to_string(a_.steps) + " --warmup 1";
    const std::string out = run(who, cmd);
    const std::string median_key = "pytorch_" + policy + "_median_ms:";
    Round r;
    bool median_line = false;
    std::size_t pos = 0;
    while (pos < out.size()) {
      const std::size_t end = std::min(out.find('\n', pos), out.size());
      const std::string line = out.substr(pos, end - pos);
      pos = end + 1;
      if (line.rfind(median_key, 0) == 0) median_line = true;
      if (line.empty() || line[0] != '{') continue;
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("step_ms")) continue;
      r.step_ms.push_back(j.at("step_ms").get<double>());
      if (j.at("step").get<std::int64_t>() == 0) r.loss1 = j.at("loss").get<double>();
    }
    if (!median_line || static_cast<std::int64_t>(r.step_ms.size()) != a_.steps)
      throw std::runtime_error(who + ": output has " + std::to_string(r.step_ms.size()) + " step records, not " +
                               std::to_string(a_.steps) + (median_line ? "" : ", and no " + median_key + " line") +
                               "\n  command: " + cmd + "\n  its output:\n" + out);
    return r;
  }

 private:
  Args a_;
  std::filesystem::path dir_;
};

struct Side {
  std::string name;
  std::vector<Round> rounds;
  double figure() const {
    std::vector<double> per_round;
    for (const auto& r : rounds) per_round.push_back(median(r.step_ms));
    return median(per_round);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path dir;
  try {
    const Args a = parse(argc, argv);
    const std::string config = tessera::models::llama_config_json(tessera::models::llama_preset(a.model));
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    std::string tmpl = (std::filesystem::temp_directory_path() / "ddp_vs_pytorch.XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory " + tmpl);
    dir = tmpl;

    Bench bench(a, dir);
    Side ddp{"tessera Ddp", {}}, torch_ddp{"torch DDP", {}}, fsdp{"tessera FullShard", {}}, torch_fsdp{"torch FSDP2", {}};
    const std::string ddp_binary = bench::build_paths::example("llama-ddp-fp32");
    const std::string fsdp_binary = bench::build_paths::example("llama-fsdp-fp32");
    for (std::int64_t round = 0; round < a.rounds; ++round) {
      ddp.rounds.push_back(bench.tessera("tessera Ddp (llama-ddp-fp32)", ddp_binary));
      torch_ddp.rounds.push_back(bench.pytorch("torch DDP (bench/ddp_reference.py --policy ddp)", "ddp", config));
      fsdp.rounds.push_back(bench.tessera("tessera FullShard (llama-fsdp-fp32)", fsdp_binary));
      torch_fsdp.rounds.push_back(bench.pytorch("torch FSDP2 (bench/ddp_reference.py --policy fsdp)", "fsdp", config));
    }
    std::filesystem::remove_all(dir);
    dir.clear();

    const std::int64_t tokens = kWorld * a.batch_size * a.seq_len;
    std::printf("model %s, %d ranks x %lld rows x seq %lld (%lld tokens/step), fp32 AdamW, 1 thread per rank, "
                "%lld steps x %lld rounds per side (+1 warm-up step each)\n",
                a.model.c_str(), kWorld, static_cast<long long>(a.batch_size), static_cast<long long>(a.seq_len),
                static_cast<long long>(tokens), static_cast<long long>(a.steps), static_cast<long long>(a.rounds));
    std::printf("%-18s", "side");
    for (std::int64_t round = 0; round < a.rounds; ++round) {
      const std::string label = "round " + std::to_string(round);
      std::printf(" %12s", label.c_str());
    }
    std::printf(" %10s %10s %10s\n", "median ms", "tokens/s", "loss@1");
    for (const Side* s : {&ddp, &torch_ddp, &fsdp, &torch_fsdp}) {
      std::printf("%-18s", s->name.c_str());
      for (const auto& r : s->rounds) std::printf(" %12.1f", median(r.step_ms));
      const double ms = s->figure();
      const auto& loss = s->rounds.front().loss1;
      char loss_text[32] = "-";
      if (loss) std::snprintf(loss_text, sizeof loss_text, "%.4f", *loss);
      std::printf(" %10.1f %10.0f %10s\n", ms, static_cast<double>(tokens) * 1e3 / ms, loss_text);
    }
    const double ddp_ratio = ddp.figure() / torch_ddp.figure(), fsdp_ratio = fsdp.figure() / torch_fsdp.figure();
    // tessera Ddp / torch DDP and tessera FullShard / torch FSDP2, then the worse of the two as the headline.
    std::printf("ddp_ratio: %.3f\n", ddp_ratio);
    std::printf("fsdp_ratio: %.3f\n", fsdp_ratio);
    std::printf("ratio: %.3f\n", std::max(ddp_ratio, fsdp_ratio));
    return 0;
  } catch (const std::exception& e) {
    if (!dir.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
    std::fprintf(stderr, "ddp_vs_pytorch: error: %s\n", e.what());
    return 1;
  }
}
