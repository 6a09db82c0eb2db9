// expect: add parameters.config. -> vector<ParamSpec>
// A tagged family that has shapes but declares no parameters, units or calls.
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>

struct NoLayout {
  using family = tessera::models::model_family_tag;
  using Config = tessera::models::LlamaConfig;
  static constexpr std::string_view name = "no-layout";
  static Config preset(std::string_view n) { return tessera::models::Llama::preset(n); }
  static std::span<const std::string_view> preset_names() { return tessera::models::Llama::preset_names(); }
  static Config read_config(const std::filesystem::path& p) { return tessera::models::Llama::read_config(p); }
  static void write_config(const std::filesystem::path& p, const Config& c, std::string_view d) {
    tessera::models::Llama::write_config(p, c, d);
  }
};

using Bad = tessera::Experiment<NoLayout>;
Bad::precision* instantiate = nullptr;
