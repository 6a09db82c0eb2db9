#include "tessera/engine/save.hpp"

namespace tessera {

void commit_dir(const std::filesystem::path& tmp, const std::filesystem::path& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir)) std::filesystem::remove(dir, ec);  // only an empty dir gets here
  std::filesystem::rename(tmp, dir, ec);
  if (ec) {
    std::filesystem::remove_all(tmp, ec);
    throw Error("save_dir=" + dir.string() + ": could not move the written weights into place");
  }
}

}  // namespace tessera
