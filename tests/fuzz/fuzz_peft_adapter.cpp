// Fuzz target: a PEFT adapter's adapter_config.json (engine/lora.hpp, lora_settings with adapter=DIR).
#include "fuzz_support.hpp"
#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/lora.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path dir = tessera::fuzz::work_dir() / "adapter";
  tessera::fuzz::write_file(dir / "adapter_config.json", data, size);
  tessera::RunConfig cfg;
  cfg.adapter = dir.string();
  try {
    (void)tessera::lora_settings(cfg, "q_proj,v_proj");
  } catch (const tessera::Error&) {
  }
  return 0;
}
