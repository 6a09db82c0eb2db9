#pragma once
// defines: the path arithmetic behind the checks on a run's outputs: one spelling per path (trailing
// separators and "." steps dropped) and "is this path inside that directory".
#include <filesystem>

namespace tessera {

// Lexically normal and without a trailing separator: "out/" and "./out/." are "out", "a/b/../c/" is "a/c";
// "/" stays "/". Writers stage their outputs beside this path, never inside it.
std::filesystem::path normalized_path(const std::filesystem::path& path);

// Absolute, with the symbolic links of its existing part resolved, then normalized_path: two spellings of
// one place give equal paths. Falls back to the absolute lexical form when the file system cannot tell.
std::filesystem::path resolved_path(const std::filesystem::path& path);

// True when `path` is `dir` or lies below it, component by component (both as resolved_path gives them).
bool is_within(const std::filesystem::path& path, const std::filesystem::path& dir);

}  // namespace tessera
