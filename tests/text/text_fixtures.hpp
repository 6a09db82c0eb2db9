#pragma once
// Helpers of the text tests (no LibTorch: they also build on their own, see docs/tokenizers.md): the committed
// tokenizers of tests/text/fixtures/ (scripts/make_test_tokenizers.py) and scratch directories.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "../scratch_dir.hpp"

namespace tessera::testing {

#ifdef TESSERA_TEXT_FIXTURES_FROM_BUILD
// The directory tessera's build names (text_fixtures.cpp): it compiles through ccache with paths relative to the
// build directory, so __FILE__ is relative there.
std::filesystem::path text_fixtures_dir();
#endif

// tests/text/fixtures/<name>: from the build's text_fixtures_dir() where it has one, else from this file's path.
inline std::filesystem::path text_fixture(std::string_view name) {
#ifdef TESSERA_TEXT_FIXTURES_FROM_BUILD
  return text_fixtures_dir() / name;
#else
  return std::filesystem::path(__FILE__).parent_path() / "fixtures" / name;
#endif
}

// An empty directory of its own under the temp directory (scratch_dir.hpp's, named "tessera-text-<tag>-<pid>").
inline std::filesystem::path text_scratch_dir(std::string_view tag) { return fresh_dir("text-" + std::string(tag)); }

inline void write_text(const std::filesystem::path& path, std::string_view text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace tessera::testing
