#pragma once
// defines: bench::run_python, how the single-process benchmarks run their Python peers: SCRIPT ARGS under the
// Python of TESSERA_PYTHON (default: the build's, the .venv with torch: build_paths.hpp), returning the JSON of
// the last stdout line that is one (progress bars and banners go to stderr, but a library may still print to stdout).
// Throws when the script fails or prints no JSON line.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "build_paths.hpp"

namespace bench {

inline nlohmann::json run_python(const std::string& script, const std::string& args) {
  const std::string cmd = build_paths::python() + " '" + script + "' " + args;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  std::string line, last;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) {
    line += buf;
    if (line.back() == '\n') {
      if (line.front() == '{') last = line;
      line.clear();
    }
  }
  if (!line.empty() && line.front() == '{') last = line;
  if (pclose(pipe) != 0 || last.empty()) throw std::runtime_error("the Python side failed: " + cmd);
  return nlohmann::json::parse(last);
}

}  // namespace bench
