// expect: add .using Batch = 
// A family with shapes and a layout but no forward program: Experiment<> names what is missing.
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>

struct NoProgram {
  using family = tessera::models::model_family_tag;
  using Config = tessera::models::LlamaConfig;
  static constexpr std::string_view name = "no-program";
  static Config preset(std::string_view n) { return tessera::models::Llama::preset(n); }
  static std::span<const std::string_view> preset_names() { return tessera::models::Llama::preset_names(); }
  static Config read_config(const std::filesystem::path& p) { return tessera::models::Llama::read_config(p); }
  static void write_config(const std::filesystem::path& p, const Config& c, std::string_view d) {
    tessera::models::Llama::write_config(p, c, d);
  }
  static std::vector<tessera::ParamSpec> parameters(const Config& c) { return tessera::models::Llama::parameters(c); }
  static std::vector<tessera::models::UnitInfo> units(const Config& c) { return tessera::models::Llama::units(c); }
  static std::vector<tessera::models::CallInfo> calls(const Config& c) { return tessera::models::Llama::calls(c); }
};

using Bad = tessera::Experiment<NoProgram>;
Bad::precision* instantiate = nullptr;
