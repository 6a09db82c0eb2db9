// cpu_adamw: one AdamW step over ~100M fp32 parameters on the CPU (the optimizer-offload case):
// tessera::optim::cpu_adamw_step against LibTorch's torch::optim::AdamW (C++; grads set on the tensors) over the same
// parameter and gradient tensors (each with its own moments), and against the Python peers of bench/cpu_adamw_peers.py
// (in the project's .venv): PyTorch 2.11's torch.optim.AdamW(fused=True) on the CPU and DeepSpeed's DeepSpeedCPUAdam
// (adamw_mode=True), over the same shapes, hyperparameters (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01)
// and thread count. Rounds alternate between this process and the Python one (each round starts with the other
// side in turn), and within a side the optimizers alternate step by step, so that all see the same machine state.
// The first step of each optimizer (first touch of its state) is not counted.
//
//   bench/cpu_adamw [steps=5 (per round)] [rounds=3] [threads=0 (all hardware threads, as bench/step_vs_pytorch)]
//
// Also printed: the fused step with bf16 grads and a bf16 param_out (the offload's copy back to the device), and
// the copy bandwidth (Tensor::copy_ over 400 MB) for scale beside the fused step's GB/s at 28 bytes per parameter.
// Per peer: its median step time (ms) and its speedup = peer median / tessera's fused fp32 median.
// Last line: `min_speedup: X.XX` = the smallest of those, i.e. against the fastest peer (goal >= 1.0).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "python_side.hpp"
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

// One round of the Python peers: their step times (ms) by peer.
nlohmann::json python_round(std::int64_t steps, std::int64_t threads) {
  const nlohmann::json j = bench::run_python(TESSERA_PEERS_SCRIPT, "--steps " + std::to_string(steps) +
                                                                      " --threads " + std::to_string(threads));
  if (j.at("threads").get<std::int64_t>() != threads)
    throw std::runtime_error("the Python peers ran on " + j.at("threads").dump() + " threads, not " +
                             std::to_string(threads));
  return j;
}

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
  std::int64_t fused_step = 0;  // the fused moments' step count (bias correction), over fp32 and bf16 steps
  auto fused = [&](bool bf16) {
    const tessera::optim::CpuAdamWHyper hyper{.lr = lr, .weight_decay = wd, .step = ++fused_step};
    for (std::size_t i = 0; i < params.size(); ++i) {
      tessera::optim::cpu_adamw_step(params[i], exp_avg[i], exp_avg_sq[i], bf16 ? grads_bf16[i] : grads[i], hyper,
                                     bf16 ? &outs_bf16[i] : nullptr);
    }
  };

  try {
    torch_adamw.step();  // warm-up: allocates and first-touches torch's moments
    fused(false);
    std::vector<double> ours, theirs, ours_bf16, torch_fused, deepspeed;
    auto native_round = [&] {
      for (std::int64_t s = 0; s < steps; ++s) {
        if (s % 2 == 0) {
          theirs.push_back(time_ms([&] { torch_adamw.step(); }));
          ours.push_back(time_ms([&] { fused(false); }));
        } else {
          ours.push_back(time_ms([&] { fused(false); }));
          theirs.push_back(time_ms([&] { torch_adamw.step(); }));
        }
        ours_bf16.push_back(time_ms([&] { fused(true); }));
      }
    };
    auto python_peers = [&] {
      const nlohmann::json j = python_round(steps, threads);
      for (const double ms : j.at("torch_fused_ms").get<std::vector<double>>()) torch_fused.push_back(ms);
      for (const double ms : j.at("deepspeed_ms").get<std::vector<double>>()) deepspeed.push_back(ms);
    };
    for (std::int64_t round = 0; round < rounds; ++round) {
      if (round % 2 == 0) {
        native_round();
        python_peers();
      } else {
        python_peers();
        native_round();
      }
    }

    // Copy bandwidth: read + write of 400 MB, median of 5 (the first touch done before).
    const at::Tensor src = at::randn({100'000'000}), dst = at::empty_like(src);
    dst.copy_(src);
    std::vector<double> copy_ms;
    for (int i = 0; i < 5; ++i) copy_ms.push_back(time_ms([&] { dst.copy_(src); }));
    const double copy_gbs = 2.0 * static_cast<double>(src.nbytes()) / (median(copy_ms) * 1e6);

    const double t_ours = median(ours);
    const double dn = static_cast<double>(n);
    auto line = [&](const char* what, const std::vector<double>& ms, double bytes_per_param) {
      const double t = median(ms);
      std::printf("%-40s median %7.1f ms/step (min %7.1f)  %6.1f Mparams/s", what, t,
                  *std::min_element(ms.begin(), ms.end()), dn / t / 1e3);
      if (bytes_per_param > 0)
        std::printf("  %5.1f GB/s at %.0f B/param", bytes_per_param * dn / t / 1e6, bytes_per_param);
      else
        std::printf("  speedup %.2f", t / t_ours);
      std::printf("\n");
    };
    std::printf("AdamW step over %lld fp32 parameters in %zu tensors, %d threads (at::get_num_threads), "
                "%lld steps x %lld rounds each\n",
                static_cast<long long>(n), params.size(), at::get_num_threads(), static_cast<long long>(steps),
                static_cast<long long>(rounds));
    line("cpu_adamw_step, fp32 grads", ours, 28);
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
