// implements: predict/dry_run.hpp's verdict, table and device memory.
#include "tessera/predict/dry_run.hpp"

#include <ATen/Context.h>
#include <unistd.h>

#include <cstdio>
#include <string_view>

#ifdef TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera::predict {
namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / double(1ll << 30));
  return buf;
}

// What happens between the previous snapshot and one of `phase`.
std::string_view interval(memory::Phase phase) {
  switch (phase) {
    case memory::Phase::before_forward: return "before the forward pass";
    case memory::Phase::after_forward: return "in the forward pass";
    case memory::Phase::after_backward: return "in the backward pass";
    case memory::Phase::after_optimizer_step: return "in the optimizer step";
  }
  return "";
}

std::string_view phase_name(memory::Phase phase) {
  switch (phase) {
    case memory::Phase::before_forward: return "before forward";
    case memory::Phase::after_forward: return "after forward";
    case memory::Phase::after_backward: return "after backward";
    case memory::Phase::after_optimizer_step: return "after the optimizer step";
  }
  return "";
}

struct Classes {
  std::int64_t params, grads, optim, acts;
};
Classes device_classes(const Prediction& p, const memory::MemorySnapshot& s) {
  const bool cpu = p.target == c10::DeviceType::CPU;
  return {s.owned.params + (cpu ? s.owned.params_cpu : 0), s.owned.grads + (cpu ? s.owned.grads_cpu : 0),
          s.owned.optim + (cpu ? s.owned.optim_cpu : 0), s.acts};
}

}  // namespace

std::optional<double> Prediction::step_seconds(double peak_flops_per_device, double mfu, double link_bytes_per_s) const {
  if (step_flops <= 0 || peak_flops_per_device <= 0 || mfu <= 0) return std::nullopt;
  const double compute = step_flops / (double(world_size) * peak_flops_per_device * mfu);
  return compute + (link_bytes_per_s > 0 ? comm.ring / link_bytes_per_s : 0.0);
}

c10::DeviceType target_of(const RunConfig& cfg) {
  if (cfg.device.rfind("cuda", 0) == 0) return c10::DeviceType::CUDA;
  if (cfg.device == "auto" && at::hasCUDA()) return c10::DeviceType::CUDA;
  return c10::DeviceType::CPU;
}

std::optional<std::int64_t> device_memory_bytes(const RunConfig& cfg, c10::DeviceType target) {
  if (!cfg.device_memory.empty()) return parse_bytes(cfg.device_memory);
  if (target == c10::DeviceType::CPU) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) return std::int64_t(pages) * std::int64_t(page);
    return std::nullopt;
  }
#ifdef TESSERA_WITH_CUDA
  cudaDeviceProp props{};
  if (at::hasCUDA() && cudaGetDeviceProperties(&props, 0) == cudaSuccess)
    return static_cast<std::int64_t>(props.totalGlobalMem);
#endif
  return std::nullopt;
}

Verdict judge(const Prediction& p, std::int64_t limit) {
  const memory::MemorySnapshot* prev = nullptr;
  for (const memory::MemorySnapshot& s : p.timeline) {
    const std::int64_t host = p.target == c10::DeviceType::CPU ? 0 : s.owned.cpu();
    const std::int64_t peak = s.allocator.peak - host;
    if (peak > limit) {
      // A later step over a limit the same phase of the first step kept: the optimizer state the first optimizer
      // step created (and keeps) is what no longer fits, as the seeds describe it.
      if (s.step > 0 && device_classes(p, s).optim > 0)
        for (const memory::MemorySnapshot& first : p.timeline)
          if (first.step == 0 && first.phase == s.phase && first.micro == s.micro &&
              first.allocator.peak - (p.target == c10::DeviceType::CPU ? 0 : first.owned.cpu()) <= limit)
            return {false, "DOES NOT FIT: after the optimizer step of step " + std::to_string(s.step - 1) + ": its " +
                               "optimizer state (" + gib(double(device_classes(p, s).optim)) + " GiB) stays, and " +
                               std::string(interval(s.phase)) + " of step " + std::to_string(s.step) + " rank " +
                               std::to_string(s.rank) + " then needs " + gib(double(peak)) + " GiB of " +
                               gib(double(limit)) + " GiB (step 0 peaked at " + gib(double(first.allocator.peak)) +
                               " GiB there)"};
      // The class that grew the most over the interval (the largest, when none grew) is the one to blame.
      const Classes now = device_classes(p, s);
      const Classes was = prev ? device_classes(p, *prev) : Classes{0, 0, 0, 0};
      const std::pair<std::string_view, std::int64_t> growth[] = {{"parameters", now.params - was.params},
                                                                 {"gradients", now.grads - was.grads},
                                                                 {"optimizer state", now.optim - was.optim},
                                                                 {"activations and buffers", now.acts - was.acts}};
      const std::pair<std::string_view, std::int64_t> size[] = {{"parameters", now.params},
                                                               {"gradients", now.grads},
                                                               {"optimizer state", now.optim},
                                                               {"activations and buffers", now.acts}};
      auto most = [](const auto& list) {
        return *std::max_element(std::begin(list), std::end(list),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
      };
      const auto grew = most(growth);
      const auto blame = grew.second > 0 ? grew : most(size);
      std::string text = "DOES NOT FIT: " + std::string(interval(s.phase)) + " of step " + std::to_string(s.step) +
                         " (micro-step " + std::to_string(s.micro) + "), rank " + std::to_string(s.rank) +
                         " needs " + gib(double(peak)) + " GiB of " + gib(double(limit)) + " GiB; the " +
                         std::string(blame.first) + " (" + (grew.second > 0 ? "+" : "") + gib(double(blame.second)) +
                         " GiB) overflow it";
      return {false, text};
    }
    prev = &s;
  }
  return {true, "FITS: rank 0 peaks at " + gib(double(p.device_peak())) + " GiB of " + gib(double(limit)) + " GiB (" +
                    gib(double(limit - p.device_peak())) + " GiB to spare)"};
}

namespace {

// Bytes in MiB, to 0.01 MiB (storages of nearly the same size are told apart: "125.02", "125.06"); "0.004" below.
std::string mib(std::int64_t bytes) {
  char b[32];
  const double m = double(bytes) / double(1 << 20);
  std::snprintf(b, sizeof b, m >= 0.01 ? "%.2f" : "%.3g", m);
  return b;
}

// The n largest holders of the peak, one line each, then the rest in one line.
std::string format_holders(const memory::PeakHolders& h, std::int64_t n, bool host_included) {
  if (n <= 0 || h.holders.empty()) return {};
  std::string s = "  held at the peak (GiB; storages by the LibTorch operator that allocated them, in backward with "
                  "its autograd node" + std::string(host_included ? "; host buffers included" : "") + "):\n";
  char line[400];
  std::int64_t rest = 0, rest_tensors = 0, shown = 0;
  for (const memory::PeakHolder& holder : h.holders) {
    if (shown++ < n) {
      const std::string count = holder.storage_bytes > 0
                                    ? std::to_string(holder.tensors) + " x " + mib(holder.storage_bytes) + " MiB"
                                    : std::to_string(holder.tensors) + " storages";
      std::snprintf(line, sizeof line, "  %9s  %-56s %s\n", gib(double(holder.bytes)).c_str(), holder.made_by.c_str(),
                    count.c_str());
      s += line;
    } else {
      rest += holder.bytes;
      rest_tensors += holder.tensors;
    }
  }
  if (rest > 0) {
    std::snprintf(line, sizeof line, "  %9s  %-56s %lld storages\n", gib(double(rest)).c_str(),
                  ("the other " + std::to_string(h.holders.size() - static_cast<std::size_t>(n)) + " kinds").c_str(),
                  static_cast<long long>(rest_tensors));
    s += line;
  }
  if (!h.reached_in.empty()) s += "  the peak was reached allocating in " + h.reached_in + "\n";
  return s;
}

}  // namespace

std::string format_prediction(const Prediction& p, const RunConfig& cfg, double peak_flops_per_device) {
  const bool gpu = p.target != c10::DeviceType::CPU;
  std::string s = "[predict] rank 0 of " + std::to_string(p.world_size) + " on " + (gpu ? "a CUDA device" : "the CPU") +
                  ", step 1 (GiB; a dry run on the meta device):\n";
  char line[320];
  std::snprintf(line, sizeof line, "  %-26s %9s %9s %9s %9s %9s %10s\n", "phase", "Params", "Grads", "Optim",
                "Acts", gpu ? "Host" : "(host)", "Allocated");
  s += line;
  for (const memory::MemorySnapshot& ph : p.phases) {
    const Classes c = device_classes(p, ph);
    std::snprintf(line, sizeof line, "  %-26s %9s %9s %9s %9s %9s %10s\n", std::string(phase_name(ph.phase)).c_str(),
                  gib(double(c.params)).c_str(), gib(double(c.grads)).c_str(), gib(double(c.optim)).c_str(),
                  gib(double(c.acts)).c_str(), gib(double(ph.owned.cpu())).c_str(),
                  gib(double(p.device_allocated(ph))).c_str());
    s += line;
  }
  s += "  peak " + gib(double(p.device_peak())) + " GiB" +
       (gpu && p.host > 0 ? " on the device, " + gib(double(p.host)) + " GiB in host memory" : "") + "\n";
  s += format_holders(p.holders, cfg.peak_holders, gpu && p.host > 0);
  if (p.comm.ops > 0)
    s += "  collectives per step: all-reduce " + gib(double(p.comm.all_reduce)) + " GiB, all-gather " +
         gib(double(p.comm.all_gather)) + " GiB, reduce-scatter " + gib(double(p.comm.reduce_scatter)) + " GiB (" +
         std::to_string(p.comm.ops) + " calls; " + gib(p.comm.ring) + " GiB sent per rank as rings)\n";
  if (p.step_flops > 0) {
    char f[200];
    std::snprintf(f, sizeof f, "  %.3g FLOPs per step (%.3g per token)", p.step_flops,
                  p.step_flops / double(std::max<std::int64_t>(1, p.tokens_per_step)));
    s += f;
    if (const auto t = p.step_seconds(peak_flops_per_device, cfg.predict_mfu, cfg.link_gb_s * 1e9)) {
      std::snprintf(f, sizeof f, "; step time %.3f s at MFU %.0f%% of %.0f TFLOP/s and %.0f GB/s links", *t,
                    100 * cfg.predict_mfu, peak_flops_per_device / 1e12, cfg.link_gb_s);
      s += f;
    } else {
      s += "; no step time without the device's peak (give peak_tflops=)";
    }
    s += "\n";
  }
  return s;
}

}  // namespace tessera::predict
