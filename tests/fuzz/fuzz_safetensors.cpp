// Fuzz target: a safetensors file (io/safetensors.hpp): the header's JSON, dtypes, shapes, offsets, metadata.
#include "fuzz_support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = tessera::fuzz::write_file(tessera::fuzz::work_dir() / "model.safetensors", data, size);
  try {
    const auto file = tessera::io::SafetensorsFile::open(path);
    std::size_t sum = 0;
    for (const auto& t : file.tensors())
      for (std::byte b : file.bytes(t)) sum += static_cast<std::size_t>(b);  // every tensor's bytes are readable
    for (const auto& [k, v] : file.metadata()) sum += k.size() + v.size();
    static volatile std::size_t sink;
    sink = sum;
  } catch (const tessera::Error&) {
  }
  return 0;
}
