#pragma once
// defines: ShapeCheck, the checks every family's Config::validate makes of its sizes: positive, within a bound far
// beyond any published model (so that every parameter count fits in 64 bits), and token ids a uint16 token file can
// hold. Each failure is a ConfigError "<origin>: <key>=<value> ...".
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/error.hpp"

namespace tessera::models {

struct ShapeCheck {
  std::string_view origin;  // the file or preset being checked
  std::string_view family;  // "Llama", "OPT": named in the bound's message

  [[noreturn]] void fail(const std::string& what) const { throw ConfigError(std::string(origin) + ": " + what); }
  void positive(std::string_view key, std::int64_t v) const {
    if (v <= 0) fail(std::string(key) + "=" + std::to_string(v) + " must be positive");
  }
  void at_most(std::string_view key, std::int64_t v, std::int64_t limit) const {
    if (v > limit)
      fail(std::string(key) + "=" + std::to_string(v) + " exceeds " + std::to_string(limit) + ", far beyond any published " +
           std::string(family) + "; the file is corrupt or describes another model");
  }
  void token_file_vocab(std::int64_t vocab_size) const {
    if (vocab_size > 65536)
      fail("vocab_size=" + std::to_string(vocab_size) + " exceeds 65536, the range of the uint16 token files tessera reads");
  }
};

}  // namespace tessera::models
