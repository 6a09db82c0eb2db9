#pragma once
// defines: what the single-process benchmarks share: median(), the 134M Llama of their `small` size,
// step_config() (the run config their timed steps start from) and a temporary directory removed with its contents at
// scope exit.
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/models/llama_config.hpp"

namespace bench {

// The command line's keys over device=cpu, then hf_step.py's LR and WEIGHT_DECAY, `steps` timed steps after one
// warm-up, and threads= resolved (0: the machine's cores), so that both sides are told the same number.
inline tessera::RunConfig step_config(std::span<const std::string_view> args, std::int64_t steps) {
  tessera::RunConfig base = tessera::parse_args(args, [] {
    tessera::RunConfig d;
    d.device = "cpu";
    return d;
  }());
  base.lr = 1e-4;
  base.weight_decay = 0.01;
  base.max_steps = steps + 1;
  if (base.threads <= 0) base.threads = static_cast<std::int64_t>(std::thread::hardware_concurrency());
  return base;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// GPT-2 small's width and depth with Llama's blocks and vocabulary: 134,105,856 parameters (untied head).
inline tessera::models::LlamaConfig small_llama() {
  tessera::models::LlamaConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 768;
  c.intermediate_size = 2048;
  c.num_hidden_layers = 12;
  c.num_attention_heads = 12;
  c.num_key_value_heads = 12;
  c.head_dim = 64;
  c.rms_norm_eps = 1e-5;
  return c;
}

// A fresh directory under the system temp dir, named after `tag`, removed with everything in it at scope exit.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("tessera-" + tag + "-XXXXXX")).string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a directory like " + tmpl);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace bench
