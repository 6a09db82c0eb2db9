// implements: the catalogue's lookup and tables (catalogue/entry.hpp).
#include "tessera/catalogue/entry.hpp"

#include <algorithm>

namespace tessera::catalogue {

const Entry* find_entry(std::span<const Entry> all, std::string_view binary) {
  const auto it = std::find_if(all.begin(), all.end(), [&](const Entry& e) { return e.binary == binary; });
  return it == all.end() ? nullptr : &*it;
}

std::vector<std::string> split_args(std::string_view words) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < words.size()) {
    const std::size_t start = words.find_first_not_of(' ', i);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(words.find(' ', start), words.size());
    out.emplace_back(words.substr(start, end - start));
    i = end;
  }
  return out;
}

std::string short_type(std::string_view experiment) {
  std::string out(experiment);
  for (const std::string_view prefix : {"tessera::models::", "tessera::"}) {
    for (std::size_t at = out.find(prefix); at != std::string::npos; at = out.find(prefix, at))
      out.erase(at, prefix.size());
  }
  return out;
}

namespace {

std::string padded(std::string_view text, std::size_t width) {
  std::string out(text);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

std::string launch(const Entry& e) {
  const std::string path = "build/catalogue/" + std::string(e.binary);
  if (e.ranks <= 1) return path;
  const std::string n = std::to_string(e.ranks);
  return "mpirun -np " + n + " " + path + "   (Slurm: srun -n " + n + " " + path + ")";
}

}  // namespace

std::string format_table(std::span<const Entry> all) {
  const std::vector<std::string> head{"seed", "step", "binary", "ranks", "experiment", "defaults"};
  std::vector<std::vector<std::string>> rows;
  for (const Entry& e : all)
    rows.push_back({std::string(e.seed), std::string(e.step), std::string(e.binary), std::to_string(e.ranks),
                    short_type(e.experiment), std::string(e.defaults)});
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c)
      out += (c == 0 ? "" : " | ") + (c + 1 == cells.size() ? cells[c] : padded(cells[c], width[c]));
    return out + "\n";
  };
  std::string out = line(head);
  std::vector<std::string> rule;
  for (std::size_t c = 0; c < head.size(); ++c) rule.push_back(std::string(c + 1 == head.size() ? 8 : width[c], '-'));
  out += line(rule);
  for (const auto& r : rows) out += line(r);
  std::string a100;
  for (const Entry& e : all)
    if (!e.a100.empty()) a100 += "  " + padded(e.binary, width[2]) + "  " + std::string(e.a100) + "\n";
  if (!a100.empty()) out += "\nthe seeds' A100 variants (give these over the defaults):\n" + a100;
  return out;
}

std::string banner(const Entry& e) {
  std::string out = "[cfg] seed " + std::string(e.seed) + ", step " + std::string(e.step) + " (" +
                    std::string(e.binary) + "): " + std::string(e.title) + "\n";
  out += "[cfg]   experiment: " + short_type(e.experiment) + "\n";
  out += "[cfg]   defaults:   " + std::string(e.defaults) + "\n";
  if (!e.a100.empty()) out += "[cfg]   A100 variant: " + std::string(e.a100) + "\n";
  out += "[cfg]   tiny variant: " + std::string(e.tiny) + "\n";
  out += "[cfg]   launch:     " + launch(e);
  return out;
}

}  // namespace tessera::catalogue
