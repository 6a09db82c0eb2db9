// Fuzz target: every family's config.json reader (models/*_config.hpp). The first byte picks the family (Llama,
// OPT, T5, ViT, BLIP-2 with OPT, BLIP-2 with T5); the rest is the file.
#include "fuzz_support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/models/blip2_config.hpp"
#include "tessera/models/llama_config.hpp"
#include "tessera/models/opt_config.hpp"
#include "tessera/models/t5_config.hpp"
#include "tessera/models/vit_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto path = tessera::fuzz::write_file(tessera::fuzz::work_dir() / "config.json", data + 1, size - 1);
  using namespace tessera::models;
  try {
    switch (data[0] % 6) {
      case 0: (void)read_llama_config(path); break;
      case 1: (void)read_opt_config(path); break;
      case 2: (void)read_t5_config(path); break;
      case 3: (void)read_vit_config(path); break;
      case 4: (void)read_blip2_config<OptConfig>(path); break;
      default: (void)read_blip2_config<T5Config>(path); break;
    }
  } catch (const tessera::Error&) {
  }
  return 0;
}
