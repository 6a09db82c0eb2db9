// bench::build_paths (build_paths.hpp): the paths CMake gives this file alone.
#include "build_paths.hpp"

#include <cstdlib>

namespace bench::build_paths {

std::string script(const std::string& file) { return std::string(TESSERA_BENCH_DIR) + "/" + file; }

std::string python() {
  const char* env = std::getenv("TESSERA_PYTHON");
  return env && *env ? env : TESSERA_DEFAULT_PYTHON;
}

std::string mpiexec() { return TESSERA_MPIEXEC; }

std::string example(const std::string& name) { return std::string(TESSERA_EXAMPLES_DIR) + "/" + name; }

}  // namespace bench::build_paths
