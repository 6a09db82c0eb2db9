#include "tessera/engine/save.hpp"

namespace tessera {

void check_save_dir(const std::string& save_dir) {
  if (save_dir.empty()) return;
  const std::filesystem::path dir(save_dir);
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return;
  if (!std::filesystem::is_directory(dir, ec) || !std::filesystem::is_empty(dir, ec))
    throw ConfigError("save_dir=" + save_dir +
                      ": exists and is not an empty directory; choose a new directory (tessera never overwrites "
                      "saved weights)");
}

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
