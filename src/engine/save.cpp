// implements: copy_companion_files (engine/save.hpp).
#include "tessera/engine/save.hpp"

#include <filesystem>
#include <string_view>
#include <system_error>

#include "tessera/core/error.hpp"

namespace tessera {

void copy_companion_files(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (from.empty()) return;
  for (std::string_view name : kCompanionFiles) {
    const std::filesystem::path src = from / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(src, ec)) continue;
    std::filesystem::copy_file(src, to / name, ec);
    if (ec) throw Error(src.string() + ": could not copy it into the saved directory: " + ec.message());
  }
}

}  // namespace tessera
