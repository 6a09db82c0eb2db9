#pragma once
// defines: io::fingerprint(path), a short description of what an input holds, for the ranks of a job to compare
// (engine/run_agreement.hpp): two copies of one file or directory give the same text, whatever their paths; an
// edit at either end, a truncation or another download gives another. It reads at most the first and last 64 KiB
// of a file, so a model of many GB is fingerprinted in milliseconds:
//   a file       "40000 bytes, CRC-32C 1a2b3c4d of its first and last 64 KiB"
//   a directory  "7 entries, CRC-32C 5e6f7a8b of their names and sizes and the ends of the first 16 files" over
//                its own entries in name order (a subdirectory by its name and number of entries; the ends of the
//                first 16 files, so that a directory of a million images is listed, not read), leaving out hidden
//                names and token caches (*.tokens), which runs write beside their data
// Anything else, or a path that cannot be read, is described as such ("cannot be read: ..."), never an error:
// the run's own reading says what is wrong with it.
#include <filesystem>
#include <string>

namespace tessera::io {

std::string fingerprint(const std::filesystem::path& path);

}  // namespace tessera::io
