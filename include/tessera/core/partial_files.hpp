#pragma once
// defines: register_partial_file / unregister_partial_file: files being written under a temporary name that
// must not outlive a killed process. When a job ends through MPI_Abort, the launcher terminates the healthy
// ranks with SIGTERM (or SIGINT/SIGHUP from a user or Slurm); a handler then removes every registered file and
// lets the signal end the process as it would have. Up to 16 files at a time; paths up to 4095 bytes.
#include <filesystem>

namespace tessera {

void register_partial_file(const std::filesystem::path& path);
void unregister_partial_file(const std::filesystem::path& path);

}  // namespace tessera
