#pragma once
// defines: tessera::main<Exp>(argc, argv), the whole program of an example binary:
//   int main(int argc, char** argv) { return tessera::main<MyExperiment>(argc, argv); }
// Arguments are key=value run-config overrides (--help lists them). Exit codes: 0 success, 1 a failed
// run (bad file, runtime error), 2 a bad configuration.
#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/trainer.hpp"

namespace tessera {

// Runs `body` (returning an exit code) and turns an escaping error into its message and exit code.
template <class Body>
int exit_code_of(Body&& body) {
  try {
    return body();
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

template <class Exp>
int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  return exit_code_of([&] {
    if (wants_help(args)) {
      std::printf("usage: %s [key=value ...]\n\n%s", argc > 0 ? argv[0] : "tessera", config_help(RunConfig{}).c_str());
      return 0;
    }
    Trainer<Exp> trainer(parse_run_config(args));
    trainer.run();
    return 0;
  });
}

}  // namespace tessera
