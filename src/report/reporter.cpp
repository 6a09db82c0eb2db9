#include "tessera/report/reporter.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace tessera {

Reporter::Reporter(MetricsWriter metrics, ReportOptions options)
    : metrics_(std::move(metrics)), options_(options), terminal_(options.print && options.progress && isatty(STDOUT_FILENO) == 1) {}

void Reporter::clear_progress() {
  if (progress_shown_) {
    std::fputs("\r\033[K", stdout);
    progress_shown_ = false;
  }
}

void Reporter::print(std::string_view text) {
  if (!options_.print) return;
  clear_progress();
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Reporter::start(nlohmann::json experiment) {
  nlohmann::json record = {{"event", "run"}};
  record.update(experiment);
  metrics_.write(record);
}

void Reporter::step(const StepResult& r, std::int64_t total_steps) {
  nlohmann::json record = {{"event", "step"}, {"step", r.step},       {"loss", r.loss},
                           {"lr", r.lr},      {"tokens", r.tokens},   {"step_ms", r.step_ms}};
  if (r.mfu > 0) record["mfu"] = r.mfu;
  if (r.loss_scale > 0) {
    record["loss_scale"] = r.loss_scale;
    record["skipped"] = r.skipped;
  }
  metrics_.write(record);
  if (!options_.print) return;
  const bool last = r.step + 1 == total_steps;
  if (r.step % options_.log_every == 0 || last || r.skipped) print(format_step_line(r, total_steps));
  if (terminal_ && !last) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fputs(("\r\033[K" + format_progress(r.step + 1, total_steps, elapsed)).c_str(), stdout);
    std::fflush(stdout);
    progress_shown_ = true;
  }
}

void Reporter::memory(const memory::MemorySnapshot& s, bool print_line) {
  nlohmann::json record = {{"event", "memory"},
                           {"step", s.step},
                           {"micro", s.micro},
                           {"phase", memory::phase_label(s.phase)},
                           {"rank", s.rank},
                           {"params", s.owned.params},
                           {"grads", s.owned.grads},
                           {"optim", s.owned.optim},
                           {"optim_cpu", s.owned.optim_cpu},
                           {"params_cpu", s.owned.params_cpu},
                           {"grads_cpu", s.owned.grads_cpu},
                           {"acts", s.acts},
                           {"allocated", s.allocator.allocated},
                           {"peak", s.allocator.peak},
                           {"reserved", s.allocator.reserved}};
  if (s.widened_peak > 0) record["widened_peak"] = s.widened_peak;
  metrics_.write(record);
  if (print_line) print("  step " + std::to_string(s.step) + " micro " + std::to_string(s.micro) + " " +
                        memory::format_snapshot(s));
}

void Reporter::memory_of_ranks(std::span<const memory::MemorySnapshot> ranks, bool print_line, bool each_rank) {
  for (const auto& s : ranks) memory(s, false);
  if (!print_line || ranks.empty()) return;
  const std::string at = "  step " + std::to_string(ranks[0].step) + " micro " + std::to_string(ranks[0].micro) + " ";
  print(at + memory::format_snapshot_max(ranks));
  if (each_rank)
    for (const auto& s : ranks) print(at + "rank " + std::to_string(s.rank) + " " + memory::format_snapshot(s));
}

void Reporter::done(double train_s, std::int64_t peak_bytes, nlohmann::json extra) {
  nlohmann::json record = {{"event", "done"}, {"train_s", train_s}, {"peak", peak_bytes}};
  record.update(extra);
  metrics_.write(record);
}

}  // namespace tessera
