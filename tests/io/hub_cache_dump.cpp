// hub_cache_dump: what tessera makes of a model_dir= value (io/hub_cache.hpp), for tests/reference/check_hub_cache.py
// to compare with huggingface_hub's snapshot_download and try_to_load_from_cache.
//   hub_cache_dump VALUE REVISION [VALUE REVISION ...]
// Prints one JSON object per pair, a line each: {"cache_dir": hub_cache_dir(), "model_dir": resolve_model_dir(VALUE,
// REVISION), "files": [[path relative to model_dir, path through model_dir], ...] (regular files, links followed,
// sorted)}, or {"cache_dir", "error": the ConfigError's message} when tessera refuses the value (every query of a
// setup in one process: LibTorch starts once). Exit 2 on bad arguments.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/io/hub_cache.hpp"

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 != 1) {
    std::fprintf(stderr, "usage: %s VALUE REVISION [VALUE REVISION ...]\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  for (int q = 1; q + 1 < argc; q += 2) {
    nlohmann::json out;
    out["cache_dir"] = tessera::io::hub_cache_dir().string();
    try {
      const fs::path dir = tessera::io::resolve_model_dir(argv[q], argv[q + 1]);
      out["model_dir"] = dir.string();
      std::vector<std::pair<std::string, std::string>> files;
      // Not into linked directories: os.walk, the reference's listing, does not follow them either.
      for (const auto& entry : fs::recursive_directory_iterator(dir))
        if (entry.is_regular_file()) files.emplace_back(entry.path().lexically_relative(dir).string(), entry.path());
      std::sort(files.begin(), files.end());
      out["files"] = files;
    } catch (const tessera::ConfigError& e) {
      out["error"] = e.what();
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  return 0;
}
