// implements: engine/run_agreement.hpp.
#include "tessera/engine/run_agreement.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "tessera/config/fields.hpp"
#include "tessera/io/fingerprint.hpp"
#include "tessera/io/hub_cache.hpp"

namespace tessera {
namespace {

std::string type_name(const std::type_info& type) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                         &std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

// Keys whose values are inputs' paths, compared by what they hold (input_facts); resume only when it names a
// checkpoint (auto and "" are settings).
bool is_input_path(std::string_view key, std::string_view value) {
  constexpr std::string_view keys[] = {"model_dir", "adapter", "data", "tokenizer"};
  return std::find(std::begin(keys), std::end(keys), key) != std::end(keys) ||
         (key == "resume" && value != "auto" && !value.empty());
}

}  // namespace

std::vector<job::Fact> launch_facts(const std::type_info& experiment, std::span<const std::string_view> flags,
                                    std::span<const std::string_view> args) {
  const std::string name = type_name(experiment);
  std::vector<job::Fact> facts{{"experiment", name, "experiment " + name}};
  for (const std::string_view flag : flags) {
    const bool given = std::find(args.begin(), args.end(), flag) != args.end();
    facts.push_back({std::string(flag), given ? "given" : "not given", (given ? "" : "no ") + std::string(flag)});
  }
  return facts;
}

std::vector<job::Fact> run_facts(const RunConfig& cfg) {
  const auto& docs = detail::docs_of<RunConfig>();
  std::vector<job::Fact> facts;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const std::string key(docs[i].name), value = format_field_value(cfg, i);
    if (!is_input_path(key, value)) facts.push_back({key, value, key + "=" + detail::displayed(value)});
  }
  return facts;
}

std::vector<job::Fact> input_facts(const RunConfig& cfg) {
  std::vector<job::Fact> facts;
  const auto add = [&](std::string_view key, const std::string& given, const std::filesystem::path& read) {
    if (given.empty()) {
      facts.push_back({std::string(key), "none", std::string(key) + "=\"\""});
      return;
    }
    const std::string print = io::fingerprint(read);
    facts.push_back({std::string(key), print, std::string(key) + "=" + given + " (" + print + ")"});
  };
  std::filesystem::path model_dir = cfg.model_dir;
  if (!cfg.model_dir.empty()) {
    try {
      model_dir = io::resolve_model_dir(cfg.model_dir, cfg.revision);
    } catch (const Error&) {  // the run says what is wrong with it
    }
  }
  add("model_dir", cfg.model_dir, model_dir);
  add("adapter", cfg.adapter, cfg.adapter);
  add("data", cfg.data, cfg.data);
  add("tokenizer", cfg.tokenizer, cfg.tokenizer);
  add("resume", cfg.resume == "auto" ? std::string() : cfg.resume, cfg.resume);
  return facts;
}

}  // namespace tessera
