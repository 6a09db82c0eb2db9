// cpu_adamw: one AdamW step over ~100M fp32 parameters on the CPU (the optimizer-offload case):
// tessera::optim::cpu_adamw_step against LibTorch's torch::optim::AdamW (C++; grads set on the tensors) over the same
// parameter and gradient tensors (each with its own moments), and against the Python peers of bench/cpu_adamw_peers.py
// (in the project's .venv): PyTorch 2.11's torch.optim.AdamW(fused=True) on the CPU and DeepSpeed's DeepSpeedCPUAdam
// (adamw_mode=True), over the same shapes, hyperparameters (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01)
// and thread count. The Python peers live in one process for the whole run, stepping when told (--serve), so that
// every optimizer's steps interleave with every other's, one step each in turn, in a shuffled order each time: all
// see the same machine state. (The 2-core VMs this runs on get their full CPU quota for ~10 s of load and then
// about half: runs of steps seconds apart compared different machines.) Each step starts after a 50 ms pause, longer
// than OpenMP's spin-wait, so that no process's idle threads spin through another's step and every step starts
// alike, its threads asleep. The first step of each optimizer (first touch of its state) is not counted.
//
//   bench/cpu_adamw [steps=5] [rounds=3] [threads=0 (all hardware threads, as bench/step_vs_pytorch)]
//
// Each optimizer is timed steps x rounds times. Also printed: the fused step in its other rounding order
// (CpuAdamWOrder), and with bf16 grads and a bf16 param_out (the offload's copy back to the device), the copy
// bandwidth (Tensor::copy_ over 400 MB) for scale beside the fused step's GB/s at 28 bytes per parameter, and the
// instruction set each side ran with.
// Per peer: its median step time (ms) and its speedup = peer median / tessera's fused fp32 median (default order).
// Last line: `min_speedup: X.XX` = the smallest of those, i.e. against the fastest peer (goal >= 1.0).
//
// A narrower CPU, emulated on a wider one (the same cores, caches and memory; only the vector instructions differ):
//   TESSERA_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 bench/cpu_adamw
// runs tessera's AVX2 kernel, ATen's AVX2 kernels (torch::optim::AdamW and torch.optim.AdamW(fused=True)), and
// DeepSpeed's op built for AVX2 (bench/cpu_adamw_peers.py); the ISA line says so, and warns when the sides differ.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/optim/adamw.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "build_paths.hpp"
#include "tessera/optim/cpu_adamw.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// "AMD EPYC ...": /proc/cpuinfo's model name, or "unknown CPU".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// "AVX512" -> "avx512", as tessera names the sets ("DEFAULT" -> "scalar").
std::string isa_name(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s == "default" ? "scalar" : s;
}

// bench/cpu_adamw_peers.py --serve under TESSERA_PYTHON (default: the build's .venv), its stdin and stdout one end
// of a socket pair: each request is a line, each answer the next stdout line that is a JSON object (a library may
// print other lines; its stderr stays this process's). Throws if the process ends or answers with an error.
class PythonPeers {
  static std::string peers_script() { return bench::build_paths::script("cpu_adamw_peers.py"); }

 public:
  explicit PythonPeers(std::int64_t threads) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("socketpair failed");
    const std::string python = bench::build_paths::python(), n = std::to_string(threads);
    const std::string peers = peers_script();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDIN_FILENO);
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execl(python.c_str(), python.c_str(), peers.c_str(), "--serve", "--threads", n.c_str(), nullptr);
      const char msg[] = "cpu_adamw: cannot run the Python of TESSERA_PYTHON\n";
      [[maybe_unused]] const ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
      _exit(127);
    }
    close(fds[1]);
    if (pid_ < 0) throw std::runtime_error("fork failed");
    fd_ = fds[0];
    in_ = fdopen(dup(fd_), "r");
    std::signal(SIGPIPE, SIG_IGN);  // a dead peer process is then a failed write, reported below
  }
  PythonPeers(const PythonPeers&) = delete;
  PythonPeers& operator=(const PythonPeers&) = delete;
  ~PythonPeers() {
    if (in_) std::fclose(in_);
    close(fd_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

  // Sends one line.
  void tell(const std::string& request) {
    const std::string line = request + "\n";
    if (write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      throw std::runtime_error("the Python peers (" + peers_script() + ") stopped listening");
  }

  // The next answer: the first JSON line it prints when ready, then one per request.
  nlohmann::json answer() {
    char buf[1 << 16];
    while (std::fgets(buf, sizeof buf, in_)) {
      if (buf[0] != '{') continue;
      nlohmann::json j = nlohmann::json::parse(buf);
      if (j.contains("error")) throw std::runtime_error("the Python peers: " + j.at("error").get<std::string>());
      return j;
    }
    throw std::runtime_error("the Python peers (" + peers_script() + ") ended early; see above");
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  FILE* in_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  std::int64_t steps = 5, rounds = 3, threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.rfind("steps=", 0) == 0) steps = std::stoll(std::string(a.substr(6)));
    else if (a.rfind("rounds=", 0) == 0) rounds = std::stoll(std::string(a.substr(7)));
    else if (a.rfind("threads=", 0) == 0) threads = std::stoll(std::string(a.substr(8)));
    else {
      std::fprintf(stderr, "usage: cpu_adamw [steps=5] [rounds=3] [threads=0]\n");
      return 2;
    }
  }
  if (steps < 1 || rounds < 1) {
    std::fprintf(stderr, "error: steps=%lld rounds=%lld: both must be at least 1\n", static_cast<long long>(steps),
                 static_cast<long long>(rounds));
    return 2;
  }
  if (threads <= 0) threads = static_cast<std::int64_t>(std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(threads));
  at::manual_seed(0);

  // Llama-like shapes: 4 attention projections, 3 MLP matrices, 2 norms (100,147,200 parameters).
  std::vector<std::vector<std::int64_t>> shapes;
  for (int i = 0; i < 4; ++i) shapes.push_back({4096, 4096});
  for (int i = 0; i < 3; ++i) shapes.push_back({2688, 4096});
  for (int i = 0; i < 2; ++i) shapes.push_back({4096});
  std::vector<at::Tensor> params, grads, grads_bf16, outs_bf16, exp_avg, exp_avg_sq;
  std::int64_t n = 0;
  for (const auto& shape : shapes) {
    params.push_back((at::randn(shape) * 0.02).requires_grad_(true));
    grads.push_back(at::randn(shape) * 1e-3);
    params.back().mutable_grad() = grads.back();
    grads_bf16.push_back(grads.back().to(at::kBFloat16));
    outs_bf16.push_back(at::empty(shape, at::kBFloat16));
    exp_avg.push_back(at::zeros(shape));
    exp_avg_sq.push_back(at::zeros(shape));
    n += params.back().numel();
  }
  const double lr = 1e-3, wd = 0.01;
  torch::optim::AdamW torch_adamw(params, torch::optim::AdamWOptions(lr).weight_decay(wd));
  std::int64_t fused_step = 0;  // the fused moments' step count (bias correction), over all fused steps
  using tessera::optim::CpuAdamWOrder;
  const CpuAdamWOrder default_order = tessera::optim::CpuAdamWHyper{}.order;
  const CpuAdamWOrder other_order =
      default_order == CpuAdamWOrder::fused ? CpuAdamWOrder::torch_ops : CpuAdamWOrder::fused;
  auto order_name = [](CpuAdamWOrder o) { return o == CpuAdamWOrder::fused ? "fused" : "torch_ops"; };
  auto fused = [&](bool bf16, CpuAdamWOrder order) {
    const tessera::optim::CpuAdamWHyper hyper{.lr = lr, .weight_decay = wd, .step = ++fused_step, .order = order};
    for (std::size_t i = 0; i < params.size(); ++i) {
      tessera::optim::cpu_adamw_step(params[i], exp_avg[i], exp_avg_sq[i], bf16 ? grads_bf16[i] : grads[i], hyper,
                                     bf16 ? &outs_bf16[i] : nullptr);
    }
  };

  try {
    const std::string tessera_isa(tessera::optim::cpu_adamw_isa());  // throws on a bad TESSERA_CPU_ISA
    const std::string widest_isa(tessera::optim::cpu_adamw_widest_isa());
    PythonPeers python(threads);
    const nlohmann::json peers_info = python.answer();  // set up and warmed up
    if (peers_info.at("threads").get<std::int64_t>() != threads)
      throw std::runtime_error("the Python peers run on " + peers_info.at("threads").dump() + " threads, not " +
                               std::to_string(threads));
    torch_adamw.step();  // warm-up: allocates and first-touches torch's moments
    fused(false, default_order);

    // Every optimizer one step in turn, in a shuffled order, each after a pause.
    std::vector<double> ours, ours_other, ours_bf16, theirs, torch_fused, deepspeed;
    auto python_step = [&](const char* peer) {
      python.tell(peer);
      return python.answer().at("ms").get<double>();
    };
    const std::vector<std::function<void()>> turns = {
        [&] { ours.push_back(time_ms([&] { fused(false, default_order); })); },
        [&] { torch_fused.push_back(python_step("torch_fused")); },
        [&] { theirs.push_back(time_ms([&] { torch_adamw.step(); })); },
        [&] { ours_other.push_back(time_ms([&] { fused(false, other_order); })); },
        [&] { deepspeed.push_back(python_step("deepspeed")); },
        [&] { ours_bf16.push_back(time_ms([&] { fused(true, default_order); })); },
    };
    std::vector<std::size_t> order(turns.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937 shuffle_rng(0);
    for (std::int64_t s = 0; s < steps * rounds; ++s) {
      std::shuffle(order.begin(), order.end(), shuffle_rng);
      for (const std::size_t k : order) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        turns[k]();
      }
    }
    python.tell("quit");

    // Copy bandwidth: read + write of 400 MB, median of 5 (the first touch done before).
    const at::Tensor src = at::randn({100'000'000}), dst = at::empty_like(src);
    dst.copy_(src);
    std::vector<double> copy_ms;
    for (int i = 0; i < 5; ++i) copy_ms.push_back(time_ms([&] { dst.copy_(src); }));
    const double copy_gbs = 2.0 * static_cast<double>(src.nbytes()) / (median(copy_ms) * 1e6);

    const double t_ours = median(ours);
    const double dn = static_cast<double>(n);
    auto line = [&](const std::string& what, const std::vector<double>& ms, double bytes_per_param) {
      const double t = median(ms);
      std::printf("%-44s median %7.1f ms/step (min %7.1f)  %6.1f Mparams/s", what.c_str(), t,
                  *std::min_element(ms.begin(), ms.end()), dn / t / 1e3);
      if (bytes_per_param > 0)
        std::printf("  %5.1f GB/s at %.0f B/param", bytes_per_param * dn / t / 1e6, bytes_per_param);
      else
        std::printf("  speedup %.2f", t / t_ours);
      std::printf("\n");
    };

    // What each side ran with. ATen's kernels (both torch optimizers) follow ATEN_CPU_CAPABILITY in each process.
    const std::string aten_isa = isa_name(at::get_cpu_capability());
    const std::string torch_py_isa = isa_name(peers_info.at("torch_cpu_capability").get<std::string>());
    const std::string deepspeed_isa = peers_info.at("deepspeed_isa").get<std::string>();
    const std::int64_t deepspeed_zmm = peers_info.at("deepspeed_zmm_instructions").get<std::int64_t>();
    std::string deepspeed_flags;
    for (const auto& flag : peers_info.at("deepspeed_cxx_args"))
      deepspeed_flags.append(" ").append(flag.get<std::string>());
    std::printf("CPU: %s (widest set: %s)\n", cpu_model().c_str(), widest_isa.c_str());
    std::printf("ISA: cpu_adamw_step %s%s | torch::optim::AdamW (C++) %s | torch.optim.AdamW(fused=True) %s | "
                "DeepSpeedCPUAdam %s (flags:%s; %lld zmm instructions in its op)\n",
                tessera_isa.c_str(), std::getenv("TESSERA_CPU_ISA") ? " (TESSERA_CPU_ISA)" : "", aten_isa.c_str(),
                torch_py_isa.c_str(), deepspeed_isa.c_str(), deepspeed_flags.c_str(),
                static_cast<long long>(deepspeed_zmm));
    if (tessera_isa != widest_isa)
      std::printf("emulated: an %s-only CPU on this %s CPU (same cores, caches and memory; narrower vectors only)\n",
                  tessera_isa.c_str(), widest_isa.c_str());
    if (aten_isa != tessera_isa || torch_py_isa != tessera_isa || deepspeed_isa != tessera_isa ||
        (deepspeed_isa != "avx512" && deepspeed_zmm != 0))
      std::printf("WARNING: the sides ran different instruction sets (set TESSERA_CPU_ISA and ATEN_CPU_CAPABILITY "
                  "alike): not like for like\n");
    std::printf("AdamW step over %lld fp32 parameters in %zu tensors, %d threads (at::get_num_threads), "
                "%lld steps per optimizer, interleaved\n",
                static_cast<long long>(n), params.size(), at::get_num_threads(),
                static_cast<long long>(steps * rounds));
    auto fp32_label = [&](CpuAdamWOrder order) {
      return std::string("cpu_adamw_step, fp32 grads, ").append(order_name(order));
    };
    line(fp32_label(default_order), ours, 28);
    line(fp32_label(other_order), ours_other, 28);
    line("cpu_adamw_step, bf16 grads + out", ours_bf16, 28);
    line("torch::optim::AdamW (C++)", theirs, 0);
    line("torch.optim.AdamW(fused=True)", torch_fused, 0);
    line("DeepSpeedCPUAdam(adamw_mode=True)", deepspeed, 0);
    // Not a floor for the AdamW pass: copy_ also pays the write-allocate read of dst, which these GB/s do not count,
    // so a kernel that streams 28 B/param can show more GB/s than this. It tells how busy memory is.
    std::printf("copy bandwidth (Tensor::copy_, 400 MB): %.1f GB/s read+write, for scale\n", copy_gbs);
    const double fastest_peer = std::min({median(theirs), median(torch_fused), median(deepspeed)});
    std::printf("min_speedup: %.2f\n", fastest_peer / t_ours);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
