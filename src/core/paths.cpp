// implements: core/paths.hpp.
#include "tessera/core/paths.hpp"

#include <algorithm>
#include <system_error>

namespace tessera {

namespace fs = std::filesystem;

fs::path normalized_path(const fs::path& path) {
  fs::path p = path.lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "out/" -> "out"; "/" stays
  return p.empty() ? fs::path(".") : p;
}

fs::path resolved_path(const fs::path& path) {
  std::error_code ec;
  // Absolute first: weakly_canonical leaves a relative path none of whose steps exists as it is ("x.jsonl"), while
  // "./x.jsonl" resolves through ".", so the two once compared different.
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec);
  return normalized_path(ec ? path : p);
}

bool is_within(const fs::path& path, const fs::path& dir) {
  const fs::path p = resolved_path(path), d = resolved_path(dir);
  const auto [d_end, p_end] = std::mismatch(d.begin(), d.end(), p.begin(), p.end());
  return d_end == d.end();
}

}  // namespace tessera
