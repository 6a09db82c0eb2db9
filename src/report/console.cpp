#include "tessera/report/console.hpp"

#include <cmath>
#include <cstdio>

namespace tessera {

std::string format_rate(double v) {
  char buf[32];
  if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string format_step_line(const StepResult& r, std::int64_t total_steps) {
  char buf[256];
  const double tok_s = r.step_ms > 0 ? static_cast<double>(r.tokens) / (r.step_ms / 1000.0) : 0.0;
  std::snprintf(buf, sizeof buf, "step %lld/%lld | loss %.4f | lr %.2e | %.0f ms | %s tok/s",
                static_cast<long long>(r.step + 1), static_cast<long long>(total_steps), r.loss, r.lr, r.step_ms,
                format_rate(tok_s).c_str());
  std::string line = buf;
  if (r.mfu > 0) {
    std::snprintf(buf, sizeof buf, " | MFU %.1f%%", 100.0 * r.mfu);
    line += buf;
  }
  if (r.loss_scale > 0) {
    std::snprintf(buf, sizeof buf, " | scale %.0f", r.loss_scale);
    line += buf;
  }
  if (r.skipped) line += " | skipped (inf/nan gradients)";
  return line;
}

std::string format_progress(std::int64_t done, std::int64_t total, double elapsed_s) {
  constexpr int width = 30;
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(std::round(frac * width));
  std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '-') + "] ";
  const double eta = done > 0 ? elapsed_s / static_cast<double>(done) * static_cast<double>(total - done) : 0.0;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%lld/%lld  elapsed %dm%02ds  eta %dm%02ds", static_cast<long long>(done),
                static_cast<long long>(total), static_cast<int>(elapsed_s) / 60, static_cast<int>(elapsed_s) % 60,
                static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  return bar + buf;
}

}  // namespace tessera
