// Fuzz target: a token file (data/token_source.hpp): llm.c's headered format or nanoGPT's raw uint16.
#include "fuzz_support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/token_source.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = tessera::fuzz::write_file(tessera::fuzz::work_dir() / "train.bin", data, size);
  try {
    const auto tokens = tessera::data::TokenSource::open(path);
    static volatile std::size_t sink;
    sink = tokens.size() + tokens.max_token();
  } catch (const tessera::Error&) {
  }
  return 0;
}
