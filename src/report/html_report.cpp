#include "tessera/report/html_report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/io/input_file.hpp"
#include "tessera/io/json_file.hpp"

namespace tessera::report {
namespace {

// Memory segments, bottom to top, with their colours (a colour-blind-safe palette).
struct Segment {
  std::string_view key, label, colour;
};
constexpr Segment segments[] = {{"params", "Params", "#4e79a7"},
                                {"grads", "Grads", "#f28e2b"},
                                {"optim", "Optimizer", "#59a14f"},
                                {"acts", "Activations", "#e15759"},
                                {"host", "Host (offload)", "#9c755f"}};
// Loss lines, one colour per run (repeating after ten).
constexpr std::string_view line_colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                             "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key))
    throw FormatError(where + ": the record has no \"" + key + "\"; this is not a tessera metrics file (write one "
                      "with metrics=FILE)");
  return j[key];
}

std::int64_t integer(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_number_integer())
    throw FormatError(where + ": \"" + key + "\" is " + io::json_excerpt(v) +
                      ", not an integer; this is not a tessera metrics file (write one with metrics=FILE)");
  return v.get<std::int64_t>();
}

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_number())
    throw FormatError(where + ": \"" + key + "\" is " + io::json_excerpt(v) +
                      ", not a number; this is not a tessera metrics file (write one with metrics=FILE)");
  return v.get<double>();
}

// An integer field from lo to hi; `range` says what those are, for the message.
std::int64_t bounded(const nlohmann::json& j, const char* key, const std::string& where, std::int64_t lo,
                     std::int64_t hi, const std::string& range) {
  const nlohmann::json& v = field(j, key, where);
  // An unsigned value past int64 (up to 2^64-1) is out of range too, not a wrapped negative one.
  const bool huge = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi);
  const std::int64_t n = huge ? hi : integer(j, key, where);
  if (huge || n < lo || n > hi)
    throw FormatError(where + ": \"" + key + "\" is " + io::json_excerpt(v) + "; " + range +
                      "; this is not a metrics file a tessera run wrote");
  return n;
}

std::string ranks_drawn() { return " (a report draws at most " + std::to_string(kMaxReportRanks) + " ranks)"; }

std::int64_t step_field(const nlohmann::json& j, const char* key, const std::string& where) {
  return bounded(j, key, where, 0, kMaxReportStep, "an index of a step is 0 to " + std::to_string(kMaxReportStep));
}

std::int64_t bytes_field(const nlohmann::json& j, const char* key, const std::string& where) {
  // Activations are the allocator's figure less the others, so a little below zero is possible.
  return bounded(j, key, where, -kMaxReportBytes, kMaxReportBytes,
                 "a memory figure is within " + std::to_string(kMaxReportBytes) + " bytes (8 PiB) of zero");
}

// Tick values from the first multiple of `step` at or above lo, up to hi, at most max_ticks of them. Each is
// computed from its index, and a step below the values' resolution ends them: "v += step" once looped without end
// over losses of 1e20 and 1e20 + 16384 (5000 added to 1e20 is 1e20).
std::vector<double> ticks(double lo, double hi, double step, int max_ticks) {
  std::vector<double> out;
  if (!(step > 0) || !std::isfinite(step) || !std::isfinite(lo) || !std::isfinite(hi)) return out;
  const double first = std::ceil(lo / step) * step;
  for (int k = 0; k < max_ticks; ++k) {
    const double v = first + k * step;
    if (v > hi || (!out.empty() && v <= out.back())) break;
    out.push_back(v);
  }
  return out;
}

std::int64_t segment_bytes(const MemoryRecord& r, std::string_view key) {
  if (key == "params") return r.params;
  if (key == "grads") return r.grads;
  if (key == "optim") return r.optim;
  if (key == "acts") return std::max<std::int64_t>(r.acts, 0);
  return r.params_cpu + r.grads_cpu + r.optim_cpu;
}

// A string field of the run record, or "-".
std::string run_text(const RunMetrics& m, const char* key) {
  if (!m.run.contains(key)) return "-";
  const nlohmann::json& v = m.run[key];
  return v.is_string() ? v.get<std::string>() : io::json_excerpt(v);
}

// Whether the run computed on the CPU, where host memory is inside the allocator's figures.
bool host_is_device(const RunMetrics& m) { return run_text(m, "device") == "cpu"; }

struct Unit {
  double bytes;
  const char* name;
};
Unit unit_for(double max_bytes) {
  return max_bytes >= double(1ll << 30) ? Unit{double(1ll << 30), "GiB"} : Unit{double(1ll << 20), "MiB"};
}

// A step of 1, 2 or 5 times a power of ten giving at most `ticks` ticks up to `top`.
double nice_step(double top, int ticks) {
  const double raw = top / ticks;
  if (!(raw > 0) || !std::isfinite(raw)) return 0;  // no ticks (see ticks())
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// The bars of one run: [rank][phase] -> RunMetrics::bar(rank, phase), found in one pass over its records.
std::vector<std::array<const MemoryRecord*, 4>> bars_of(const RunMetrics& m) {
  const std::int64_t ranks = m.world_size(), step = m.memory_step();
  std::vector<std::array<const MemoryRecord*, 4>> bars(static_cast<std::size_t>(ranks));
  for (const MemoryRecord& r : m.memory) {
    const auto phase = std::find(std::begin(phase_labels), std::end(phase_labels), r.phase) - std::begin(phase_labels);
    if (r.step != step || r.rank >= ranks || phase >= 4) continue;
    const MemoryRecord*& best = bars[static_cast<std::size_t>(r.rank)][static_cast<std::size_t>(phase)];
    if (!best || r.allocated > best->allocated) best = &r;
  }
  return bars;
}

std::string memory_chart(std::span<const RunMetrics> runs) {
  std::vector<std::vector<std::array<const MemoryRecord*, 4>>> run_bars;
  for (const RunMetrics& m : runs) run_bars.push_back(bars_of(m));
  // Narrower bars when there are many, so that a dozen runs still fit a screen.
  std::int64_t total_bars = 0;
  for (const auto& bars : run_bars) total_bars += 4 * static_cast<std::int64_t>(bars.size());
  const bool many = total_bars > 32;
  const double bar_w = many ? 11 : 18, bar_gap = many ? 2 : 4, rank_gap = many ? 10 : 16, run_gap = many ? 40 : 56;
  constexpr double left = 64, top = 28, plot_h = 280, bottom = 100;
  // Scale: the tallest stack or peak of any run.
  double max_bytes = 1;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& m = runs[i];
    max_bytes = std::max({max_bytes, m.done.value("peak", 0.0), m.done.value("predicted_peak", 0.0)});
    for (const auto& rank_bars : run_bars[i])
      for (const MemoryRecord* b : rank_bars)
        if (b) {
          double sum = 0;
          for (const Segment& s : segments)
            if (s.key != "host" || host_is_device(m)) sum += double(segment_bytes(*b, s.key));
          max_bytes = std::max(max_bytes, sum);
        }
  }
  const Unit unit = unit_for(max_bytes);
  const double step = nice_step(max_bytes / unit.bytes, 5);
  const double axis_top = std::ceil(max_bytes / unit.bytes / step) * step;
  auto y_of = [&](double bytes) { return top + plot_h - plot_h * (bytes / unit.bytes) / axis_top; };

  std::string bars, labels;
  double x = left + 16;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& m = runs[i];
    const double group_start = x;
    const std::int64_t ranks = static_cast<std::int64_t>(run_bars[i].size());
    for (std::int64_t r = 0; r < ranks; ++r) {
      const double rank_start = x;
      for (std::size_t phase = 0; phase < 4; ++phase) {
        const std::string_view p = phase_labels[phase];
        const MemoryRecord* b = run_bars[i][static_cast<std::size_t>(r)][phase];
        double base = 0;
        if (b)
          for (const Segment& s : segments) {
            if (s.key == "host" && !host_is_device(m)) continue;
            const double v = double(segment_bytes(*b, s.key));
            if (v <= 0) continue;
            const double y1 = y_of(base + v), y0 = y_of(base);
            bars += "<rect class=\"seg " + std::string(s.key) + "\" data-run=\"" + std::to_string(i) +
                    "\" data-rank=\"" + std::to_string(r) + "\" data-phase=\"" + std::string(p) + "\" data-bytes=\"" +
                    std::to_string(std::int64_t(v)) + "\" x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y1) +
                    "\" width=\"" + fmt("%.0f", bar_w) + "\" height=\"" + fmt("%.1f", std::max(y0 - y1, 0.5)) +
                    "\" fill=\"" + std::string(s.colour) + "\"><title>" + html_escape(m.label) + ", rank " +
                    std::to_string(r) + ", " + std::string(p) + ": " + std::string(s.label) + " " +
                    fmt("%.3f", v / unit.bytes) + " " + unit.name + "</title></rect>\n";
            base += v;
          }
        x += bar_w + bar_gap;
      }
      if (ranks > 1)
        labels += "<text class=\"rank\" x=\"" + fmt("%.1f", (rank_start + x - bar_gap) / 2) + "\" y=\"" +
                  fmt("%.1f", top + plot_h + 14) + "\" text-anchor=\"middle\">r" + std::to_string(r) + "</text>\n";
      x += rank_gap;
    }
    x -= rank_gap;
    const double group_end = x - bar_gap;
    const double mid = (group_start + group_end) / 2;
    // The run's measured peak (the highest rank's, over the whole run).
    const double peak = m.done.value("peak", 0.0);
    if (peak > 0) {
      const double y = y_of(peak);
      bars += "<line class=\"peak\" data-run=\"" + std::to_string(i) + "\" x1=\"" + fmt("%.1f", group_start - 4) +
              "\" x2=\"" + fmt("%.1f", group_end + 4) + "\" y1=\"" + fmt("%.1f", y) + "\" y2=\"" + fmt("%.1f", y) +
              "\" stroke=\"#000\" stroke-width=\"2\"><title>" + html_escape(m.label) + ": measured peak " +
              fmt("%.3f", peak / unit.bytes) + " " + unit.name + "</title></line>\n";
      bars += "<text class=\"peak-label\" x=\"" + fmt("%.1f", mid) + "\" y=\"" + fmt("%.1f", y - 5) +
              "\" text-anchor=\"middle\">peak " + fmt("%.2f", peak / unit.bytes) + "</text>\n";
    }
    // The peak the run predicted for itself (predict=true: a dry run on the meta device), dashed.
    if (m.done.contains("predicted_peak") && m.done["predicted_peak"].is_number()) {
      const double predicted = m.done["predicted_peak"].get<double>();
      const double y = y_of(predicted);
      bars += "<line class=\"predicted\" data-run=\"" + std::to_string(i) + "\" x1=\"" + fmt("%.1f", group_start - 4) +
              "\" x2=\"" + fmt("%.1f", group_end + 4) + "\" y1=\"" + fmt("%.1f", y) + "\" y2=\"" + fmt("%.1f", y) +
              "\" stroke=\"#555\" stroke-width=\"2\" stroke-dasharray=\"5,3\"><title>" + html_escape(m.label) +
              ": predicted peak " + fmt("%.3f", predicted / unit.bytes) + " " + unit.name + "</title></line>\n";
    }
    const double base_y = top + plot_h + (ranks > 1 ? 30 : 18);
    labels += "<text class=\"run\" x=\"" + fmt("%.1f", mid) + "\" y=\"" + fmt("%.1f", base_y) +
              "\" text-anchor=\"middle\" font-weight=\"bold\">" + html_escape(m.label) + "</text>\n";
    std::vector<std::string> figures{fmt("%.0f ms/step", m.mean_step_ms())};
    if (m.done.contains("tokens_per_s")) figures.push_back(fmt("%.0f tok/s", m.done["tokens_per_s"].get<double>()));
    if (m.mean_mfu() > 0) figures.push_back("MFU " + fmt("%.1f%%", 100 * m.mean_mfu()));
    for (std::size_t k = 0; k < figures.size(); ++k)
      labels += "<text class=\"figures\" x=\"" + fmt("%.1f", mid) + "\" y=\"" + fmt("%.1f", base_y + 15 + 14 * double(k)) +
                "\" text-anchor=\"middle\">" + figures[k] + "</text>\n";
    x += run_gap;
  }
  const double width = std::max(x - run_gap + 32, 480.0);
  std::string axis;
  for (const double v : ticks(0, axis_top + step / 2, step, 32)) {
    const double y = top + plot_h - plot_h * v / axis_top;
    axis += "<line x1=\"" + fmt("%.0f", left) + "\" x2=\"" + fmt("%.0f", width) + "\" y1=\"" + fmt("%.1f", y) +
            "\" y2=\"" + fmt("%.1f", y) + "\" stroke=\"#ddd\"/>\n<text x=\"" + fmt("%.0f", left - 6) + "\" y=\"" +
            fmt("%.1f", y + 4) + "\" text-anchor=\"end\">" + fmt(step < 1 ? "%.2f" : "%.0f", v) + "</text>\n";
  }
  axis += "<text x=\"14\" y=\"" + fmt("%.0f", top + plot_h / 2) + "\" transform=\"rotate(-90 14 " +
          fmt("%.0f", top + plot_h / 2) + ")\" text-anchor=\"middle\">" + unit.name + "</text>\n";
  const double height = top + plot_h + bottom;
  return "<svg class=\"chart memory\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
         "\" height=\"" + fmt("%.0f", height) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " + fmt("%.0f", height) +
         "\">\n" + axis + bars + labels + "</svg>\n";
}

std::string loss_chart(std::span<const RunMetrics> runs) {
  constexpr double left = 64, top = 16, plot_w = 760, plot_h = 260, bottom = 40;
  double lo = INFINITY, hi = -INFINITY;
  std::int64_t last = 1;
  for (const RunMetrics& m : runs)
    for (const StepRecord& s : m.steps)
      if (std::isfinite(s.loss)) {
        lo = std::min(lo, s.loss);
        hi = std::max(hi, s.loss);
        last = std::max(last, s.step);
      }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  // A flat curve gets a band around it, one its magnitude can show (at 1e20, +-0.5 is below a double's resolution).
  const double magnitude = std::max(std::abs(lo), std::abs(hi));
  if (hi - lo < std::max(1e-6, magnitude * 1e-9)) {
    const double mid = lo / 2 + hi / 2, half = std::max(0.5, magnitude * 1e-6);
    lo = mid - half, hi = mid + half;
  }
  const double pad = (hi - lo) * 0.05;
  lo -= pad, hi += pad;
  auto xs = [&](double step) { return left + plot_w * step / double(last); };
  auto ys = [&](double loss) { return top + plot_h - plot_h * (loss - lo) / (hi - lo); };
  std::string s = "<svg class=\"chart loss\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  fmt("%.0f", left + plot_w + 24) + "\" height=\"" + fmt("%.0f", top + plot_h + bottom) + "\">\n";
  const double ystep = nice_step(hi - lo, 5);
  const char* ylabel = magnitude >= 1e6 ? "%.6g" : ystep < 0.1 ? "%.3f" : "%.2f";
  for (const double v : ticks(lo, hi, ystep, 32))
    s += "<line x1=\"" + fmt("%.0f", left) + "\" x2=\"" + fmt("%.0f", left + plot_w) + "\" y1=\"" + fmt("%.1f", ys(v)) +
         "\" y2=\"" + fmt("%.1f", ys(v)) + "\" stroke=\"#ddd\"/><text x=\"" + fmt("%.0f", left - 6) + "\" y=\"" +
         fmt("%.1f", ys(v) + 4) + "\" text-anchor=\"end\">" + fmt(ylabel, v) + "</text>\n";
  const double xstep = std::max(1.0, nice_step(double(last), 8));
  for (const double v : ticks(0, double(last), xstep, 32))
    s += "<text x=\"" + fmt("%.1f", xs(v)) + "\" y=\"" + fmt("%.0f", top + plot_h + 16) +
         "\" text-anchor=\"middle\">" + fmt("%.0f", v) + "</text>\n";
  s += "<text x=\"" + fmt("%.0f", left + plot_w / 2) + "\" y=\"" + fmt("%.0f", top + plot_h + 34) +
       "\" text-anchor=\"middle\">step</text>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string points;
    for (const StepRecord& st : runs[i].steps)
      if (std::isfinite(st.loss)) points += fmt("%.1f", xs(double(st.step))) + "," + fmt("%.1f", ys(st.loss)) + " ";
    const std::string colour(line_colours[i % std::size(line_colours)]);
    s += "<polyline class=\"loss-line\" data-run=\"" + std::to_string(i) + "\" fill=\"none\" stroke=\"" + colour +
         "\" stroke-width=\"2.5\" points=\"" + points + "\"><title>" + html_escape(runs[i].label) +
         "</title></polyline>\n";
    if (runs[i].steps.size() == 1 && std::isfinite(runs[i].steps[0].loss))  // a single point: a dot
      s += "<circle cx=\"" + fmt("%.1f", xs(double(runs[i].steps[0].step))) + "\" cy=\"" +
           fmt("%.1f", ys(runs[i].steps[0].loss)) + "\" r=\"4\" fill=\"" + colour + "\"/>\n";
  }
  return s + "</svg>\n";
}

std::string gib(double bytes) { return fmt("%.3f", bytes / double(1ll << 30)); }

std::string table(std::span<const RunMetrics> runs) {
  std::string s =
      "<table class=\"runs\">\n<thead><tr><th>Run</th><th>Model</th><th>Sharding</th><th>Precision</th>"
      "<th>Optimizer</th><th>Checkpointing</th><th>Offload</th><th>Adapter</th><th>Ranks</th><th>Batch × accum</th>"
      "<th>Params</th><th>Grads</th><th>Optim</th><th>Acts</th><th>Host</th><th>Peak (GiB)</th><th>Predicted</th>"
      "<th>ms/step</th>"
      "<th>tokens/s</th><th>MFU</th><th>Final loss</th></tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& m = runs[i];
    std::int64_t params = 0, grads = 0, optim = 0, acts = 0, host = 0;
    for (const MemoryRecord& r : m.memory) {
      params = std::max(params, r.params);
      grads = std::max(grads, r.grads);
      optim = std::max(optim, r.optim);
      acts = std::max(acts, r.acts);
      host = std::max(host, r.params_cpu + r.grads_cpu + r.optim_cpu);
    }
    const std::string colour(line_colours[i % std::size(line_colours)]);
    auto td = [](const std::string& v) { return "<td>" + html_escape(v) + "</td>"; };
    s += "<tr><td><span class=\"swatch\" style=\"background:" + colour + "\"></span>" + html_escape(m.label) + "</td>";
    s += td(run_text(m, "family") + " " + run_text(m, "model")) + td(run_text(m, "sharding")) +
         td(run_text(m, "precision")) + td(run_text(m, "optimizer")) + td(run_text(m, "checkpointing")) +
         td(run_text(m, "offload")) + td(run_text(m, "adapter")) + td(std::to_string(m.world_size())) +
         td(run_text(m, "batch_size") + " × " + run_text(m, "accumulate_grad_batches"));
    for (std::int64_t b : {params, grads, optim, acts, host}) s += td(gib(double(b)));
    s += td(gib(m.done.value("peak", 0.0))) +
         td(m.done.contains("predicted_peak") ? gib(m.done.value("predicted_peak", 0.0)) : "-") +
         td(fmt("%.1f", m.mean_step_ms())) +
         td(m.done.contains("tokens_per_s") ? fmt("%.0f", m.done["tokens_per_s"].get<double>()) : "-") +
         td(m.mean_mfu() > 0 ? fmt("%.2f%%", 100 * m.mean_mfu()) : "-") +
         td(m.steps.empty() ? "-" : fmt("%.4f", m.steps.back().loss)) + "</tr>\n";
  }
  return s + "</tbody></table>\n";
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::int64_t RunMetrics::world_size() const {
  if (done.contains("world_size") && done["world_size"].is_number_integer())
    return std::max<std::int64_t>(1, done["world_size"].get<std::int64_t>());
  std::int64_t ranks = 1;
  for (const MemoryRecord& r : memory) ranks = std::max(ranks, r.rank + 1);
  return ranks;
}

std::int64_t RunMetrics::memory_step() const {
  std::int64_t last = -1;
  for (const MemoryRecord& r : memory) {
    if (r.step == 1) return 1;
    last = std::max(last, r.step);
  }
  return last;
}

const MemoryRecord* RunMetrics::bar(std::int64_t rank, std::string_view phase) const {
  const std::int64_t step = memory_step();
  const MemoryRecord* best = nullptr;
  for (const MemoryRecord& r : memory)
    if (r.step == step && r.rank == rank && r.phase == phase && (!best || r.allocated > best->allocated)) best = &r;
  return best;
}

double RunMetrics::mean_step_ms() const {
  double sum = 0;
  std::size_t n = 0;
  for (const StepRecord& s : steps)
    if (s.step > 0 || steps.size() == 1) sum += s.step_ms, ++n;
  return n ? sum / double(n) : 0.0;
}

double RunMetrics::mean_mfu() const {
  if (done.contains("mfu") && done["mfu"].is_number()) return done["mfu"].get<double>();
  double sum = 0;
  std::size_t n = 0;
  for (const StepRecord& s : steps)
    if (s.mfu > 0 && (s.step > 0 || steps.size() == 1)) sum += s.mfu, ++n;
  return n ? sum / double(n) : 0.0;
}

RunMetrics read_metrics(const std::filesystem::path& path) {
  io::InputFile in(path);  // a FIFO or device refused, without blocking
  if (!in.is_open())
    throw Error(path.string() + ": cannot be read (" + in.problem() + "); give the metrics=FILE of a finished run");
  RunMetrics m;
  m.label = path.filename().string();
  if (m.label.size() > 6 && m.label.ends_with(".jsonl")) m.label.resize(m.label.size() - 6);
  m.run = nlohmann::json::object();
  std::vector<std::size_t> memory_lines;  // the line of each memory record, for the check against world_size
  std::size_t line_no = 0, done_line = 0;
  std::string line;
  std::streambuf& bytes = *in.rdbuf();
  for (bool more = true; more;) {
    // One line, read up to kMaxRecordBytes (std::getline would take a newline-free file whole).
    line.clear();
    more = false;
    for (int c; (c = bytes.sbumpc()) != std::char_traits<char>::eof();) {
      if (c == '\n') {
        more = true;
        break;
      }
      if (line.size() == kMaxRecordBytes)
        throw FormatError(path.string() + ":" + std::to_string(line_no + 1) + ": a line longer than " +
                          std::to_string(kMaxRecordBytes) + " bytes; this is not a tessera metrics file (write one "
                          "with metrics=FILE)");
      line.push_back(static_cast<char>(c));
    }
    if (!more && line.empty()) break;
    ++line_no;
    const std::string where = path.string() + ":" + std::to_string(line_no);
    if (line.empty()) continue;
    if (const auto nested = io::json_nesting_error(line))
      throw FormatError(where + ": the record " + *nested + "; this is not a tessera metrics file (write one with "
                        "metrics=FILE)");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for a number past a double's range
      throw FormatError(where + ": not a JSON record; a tessera metrics file has one JSON object a line (write one "
                        "with metrics=FILE)");
    }
    if (!j.is_object() || !j.contains("event") || !j["event"].is_string())
      throw FormatError(where + ": a record without an \"event\"; this is not a tessera metrics file (write one with "
                        "metrics=FILE)");
    const std::string event = j["event"].get<std::string>();
    if (event == "run") {
      m.run = j;
    } else if (event == "memory") {
      MemoryRecord r;
      r.step = step_field(j, "step", where);
      r.micro = step_field(j, "micro", where);
      r.rank = bounded(j, "rank", where, 0, kMaxReportRanks - 1,
                       "a rank is 0 to " + std::to_string(kMaxReportRanks - 1) + ranks_drawn());
      const nlohmann::json& phase = field(j, "phase", where);
      if (!phase.is_string() ||
          std::find(std::begin(phase_labels), std::end(phase_labels), phase.get<std::string>()) == std::end(phase_labels))
        throw FormatError(where + ": \"phase\" is " + io::json_excerpt(phase) +
                          "; a phase is before_fwd, after_fwd, after_bwd or after_opt");
      r.phase = phase.get<std::string>();
      r.params = bytes_field(j, "params", where);
      r.grads = bytes_field(j, "grads", where);
      r.optim = bytes_field(j, "optim", where);
      r.acts = bytes_field(j, "acts", where);
      // Host-side bytes: recorded by runs that offload, absent from older files.
      r.params_cpu = j.contains("params_cpu") ? bytes_field(j, "params_cpu", where) : 0;
      r.grads_cpu = j.contains("grads_cpu") ? bytes_field(j, "grads_cpu", where) : 0;
      r.optim_cpu = j.contains("optim_cpu") ? bytes_field(j, "optim_cpu", where) : 0;
      r.allocated = bytes_field(j, "allocated", where);
      r.peak = bytes_field(j, "peak", where);
      r.reserved = bytes_field(j, "reserved", where);
      m.memory.push_back(std::move(r));
      memory_lines.push_back(line_no);
    } else if (event == "step") {
      StepRecord s;
      s.step = step_field(j, "step", where);
      s.loss = field(j, "loss", where).is_null() ? NAN : number(j, "loss", where);
      if (std::abs(s.loss) > kMaxReportLoss)
        throw FormatError(where + ": \"loss\" is " + io::json_excerpt(j["loss"]) + ", beyond a float's range (" +
                          fmt("%g", kMaxReportLoss) + "), which no run's loss reaches; this is not a metrics file a "
                          "tessera run wrote");
      s.step_ms = number(j, "step_ms", where);
      s.tokens = bounded(j, "tokens", where, 0, kMaxReportBytes,
                         "a count of tokens is 0 to " + std::to_string(kMaxReportBytes));
      s.mfu = j.contains("mfu") ? number(j, "mfu", where) : 0.0;
      if (j.contains("skipped") && !j["skipped"].is_boolean())
        throw FormatError(where + ": \"skipped\" is " + io::json_excerpt(j["skipped"]) + ", not true or false; this "
                          "is not a tessera metrics file (write one with metrics=FILE)");
      s.skipped = j.value("skipped", false);
      m.steps.push_back(s);
    } else if (event == "done") {
      bounded(j, "peak", where, 0, kMaxReportBytes,
              "a peak is 0 to " + std::to_string(kMaxReportBytes) + " bytes (8 PiB)");
      number(j, "train_s", where);
      if (j.contains("world_size"))
        bounded(j, "world_size", where, 1, kMaxReportRanks,
                "a world size is 1 to " + std::to_string(kMaxReportRanks) + ranks_drawn());
      // The optional figures the report shows: a number, or null (JSON's spelling of a non-finite one), dropped here.
      for (const char* optional : {"predicted_peak", "tokens_per_s", "mfu"})
        if (j.contains(optional) && j[optional].is_null()) j.erase(optional);
        else if (j.contains(optional)) number(j, optional, where);
      if (const double predicted = j.value("predicted_peak", 0.0);
          !(predicted >= 0 && predicted <= double(kMaxReportBytes)))
        throw FormatError(where + ": \"predicted_peak\" is " + io::json_excerpt(j["predicted_peak"]) +
                          "; a peak is 0 to " + std::to_string(kMaxReportBytes) + " bytes (8 PiB); this is not a "
                          "metrics file a tessera run wrote");
      m.done = j;
      done_line = line_no;
    }  // other events: later versions' records, skipped
  }
  if (m.done.is_null())
    throw FormatError(path.string() + ": no \"done\" record, so the run did not finish (a run still going, or one that "
                      "failed, has no metrics file); give the metrics=FILE of a finished run");
  if (m.done.contains("world_size"))
    for (std::size_t i = 0; i < m.memory.size(); ++i)
      if (m.memory[i].rank >= m.done["world_size"].get<std::int64_t>())
        throw FormatError(path.string() + ":" + std::to_string(memory_lines[i]) + ": \"rank\" is " +
                          std::to_string(m.memory[i].rank) + ", but the done record (line " +
                          std::to_string(done_line) + ") says \"world_size\" " +
                          m.done["world_size"].dump() + "; this is not a metrics file a tessera run wrote");
  return m;
}

std::string html_report(std::span<const RunMetrics> runs, std::string_view title) {
  if (runs.empty()) throw Error("tessera-report: no runs to report; give one or more metrics files");
  std::string legend;
  for (const Segment& s : segments)
    legend += "<span class=\"key\"><span class=\"swatch\" style=\"background:" + std::string(s.colour) + "\"></span>" +
              std::string(s.label) + "</span>";
  legend += "<span class=\"key\"><span class=\"peak-key\"></span>measured peak</span>";
  legend += "<span class=\"key\"><span class=\"predicted-key\"></span>predicted peak</span>";
  std::string loss_legend;
  for (std::size_t i = 0; i < runs.size(); ++i)
    loss_legend += "<span class=\"key\"><span class=\"swatch\" style=\"background:" +
                   std::string(line_colours[i % std::size(line_colours)]) + "\"></span>" + html_escape(runs[i].label) +
                   "</span>";
  std::set<std::int64_t> steps_shown;
  for (const RunMetrics& m : runs) steps_shown.insert(m.memory_step());
  std::string step_note = steps_shown.size() == 1 && *steps_shown.begin() >= 0
                              ? "at step " + std::to_string(*steps_shown.begin())
                              : "at step 1, or the last step recorded";
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
         "</title>\n<style>\n"
         "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:24px;color:#222;background:#fff}\n"
         "h1{font-size:22px}h2{font-size:17px;margin-top:28px}\n"
         "svg text{font-size:12px;fill:#222}svg .peak-label{font-size:11px}svg .figures{font-size:11px;fill:#444}\n"
         ".key{display:inline-block;margin-right:16px;font-size:13px}\n"
         ".swatch{display:inline-block;width:12px;height:12px;margin-right:5px;vertical-align:-1px}\n"
         ".peak-key{display:inline-block;width:16px;border-top:2px solid #000;margin-right:5px;vertical-align:3px}\n"
         ".predicted-key{display:inline-block;width:16px;border-top:2px dashed #555;margin-right:5px;vertical-align:3px}\n"
         "table{border-collapse:collapse;font-size:12px;margin-top:8px}\n"
         "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}\n"
         "td:nth-child(-n+8),th:nth-child(-n+8){text-align:left}\n"
         "</style></head>\n<body>\n<h1>" +
         html_escape(title) + "</h1>\n<p>" + std::to_string(runs.size()) +
         " run(s). Memory per phase " + step_note +
         " (one bar per phase: before forward, after forward, after backward, after the optimizer step; per rank in "
         "jobs of several). Activations are the allocator's figure less the parameters, gradients and optimizer "
         "state.</p>\n<h2>Memory by phase</h2>\n<div class=\"legend\">" +
         legend + "</div>\n" + memory_chart(runs) + "<h2>Loss</h2>\n<div class=\"legend\">" + loss_legend + "</div>\n" +
         loss_chart(runs) + "<h2>Runs</h2>\n" + table(runs) +
         "<p>Memory figures in GiB: the highest over phases and ranks; peak: the allocator's high-water mark over "
         "the run (highest rank); ms/step and MFU: the mean over the steps after the first.</p>\n</body></html>\n";
}

}  // namespace tessera::report
