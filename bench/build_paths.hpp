#pragma once
// defines: bench::build_paths, what the benchmarks find by path: their Python peers, the Python with torch, MPI's
// launcher and the example binaries. One small file (build_paths.cpp) is compiled with this checkout's paths, so that
// the benchmarks' own compile lines carry none and ccache answers them from a clone in another folder.
#include <string>

namespace bench::build_paths {

std::string script(const std::string& file);    // bench/<file> of the source tree
std::string python();                           // TESSERA_PYTHON from the environment, else the build's Python
std::string mpiexec();                          // the MPI launcher the build found
std::string example(const std::string& name);  // the build's example binary <name>

}  // namespace bench::build_paths
