// cpu_adamw: one AdamW step over ~100M fp32 parameters on the CPU (the optimizer-offload case), LibTorch's
// torch::optim::AdamW (grads set on the tensors) against tessera::optim::cpu_adamw_step, over the same parameter and
// gradient tensors (each with its own moments), on the same intra-op threads, alternating step by step so that
// both see the same machine state. Step 0 of each (first touch of torch's state) is not counted.
//
//   bench/cpu_adamw [steps=5] [threads=0 (all hardware threads, as bench/step_vs_pytorch)]
//
// Also printed: the fused step with bf16 grads and a bf16 param_out (the offload's copy back to the device), and
// the copy bandwidth (Tensor::copy_ over 400 MB), for the floor of a pass that moves 28 bytes per parameter.
// Last line: `speedup: X.XX` = torch median step time / fused median step time (fp32).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
  std::int64_t steps = 5, threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.rfind("steps=", 0) == 0) steps = std::stoll(std::string(a.substr(6)));
    else if (a.rfind("threads=", 0) == 0) threads = std::stoll(std::string(a.substr(8)));
    else {
      std::fprintf(stderr, "usage: cpu_adamw [steps=5] [threads=0]\n");
      return 2;
    }
  }
  at::set_num_threads(static_cast<int>(threads > 0 ? threads : std::thread::hardware_concurrency()));
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
  auto fused = [&](std::int64_t step, bool bf16) {
    const tessera::optim::CpuAdamWHyper hyper{.lr = lr, .weight_decay = wd, .step = step};
    for (std::size_t i = 0; i < params.size(); ++i) {
      tessera::optim::cpu_adamw_step(params[i], exp_avg[i], exp_avg_sq[i], bf16 ? grads_bf16[i] : grads[i], hyper,
                                     bf16 ? &outs_bf16[i] : nullptr);
    }
  };

  torch_adamw.step();  // warm-up: allocates and first-touches torch's moments
  fused(1, false);
  std::vector<double> ours, theirs, ours_bf16;
  for (std::int64_t s = 0; s < steps; ++s) {
    if (s % 2 == 0) {
      theirs.push_back(time_ms([&] { torch_adamw.step(); }));
      ours.push_back(time_ms([&] { fused(2 * s + 2, false); }));
    } else {
      ours.push_back(time_ms([&] { fused(2 * s + 2, false); }));
      theirs.push_back(time_ms([&] { torch_adamw.step(); }));
    }
    ours_bf16.push_back(time_ms([&] { fused(2 * s + 3, true); }));
  }

  // Copy bandwidth: read + write of 400 MB, median of 5 (the first touch done before).
  const at::Tensor src = at::randn({100'000'000}), dst = at::empty_like(src);
  dst.copy_(src);
  std::vector<double> copy_ms;
  for (int i = 0; i < 5; ++i) copy_ms.push_back(time_ms([&] { dst.copy_(src); }));
  const double copy_gbs = 2.0 * static_cast<double>(src.nbytes()) / (median(copy_ms) * 1e6);

  const double t_torch = median(theirs), t_ours = median(ours);
  const double dn = static_cast<double>(n);
  auto line = [&](const char* what, const std::vector<double>& ms, double bytes_per_param) {
    const double t = median(ms);
    std::printf("%-34s median %7.1f ms/step (min %7.1f)  %6.1f Mparams/s", what, t,
                *std::min_element(ms.begin(), ms.end()), dn / t / 1e3);
    if (bytes_per_param > 0)
      std::printf("  %5.1f GB/s at %.0f B/param", bytes_per_param * dn / t / 1e6, bytes_per_param);
    std::printf("\n");
  };
  std::printf("AdamW step over %lld fp32 parameters in %zu tensors, %d threads (at::get_num_threads), "
              "%lld steps each\n",
              static_cast<long long>(n), params.size(), at::get_num_threads(), static_cast<long long>(steps));
  line("torch::optim::AdamW", theirs, 0);
  line("cpu_adamw_step, fp32 grads", ours, 28);
  line("cpu_adamw_step, bf16 grads + out", ours_bf16, 28);
  std::printf("copy bandwidth (Tensor::copy_, 400 MB): %.1f GB/s read+write -> a 28 B/param pass >= %.1f ms\n",
              copy_gbs, 28.0 * dn / (copy_gbs * 1e6));
  std::printf("speedup: %.2f\n", t_torch / t_ours);
  return 0;
}
