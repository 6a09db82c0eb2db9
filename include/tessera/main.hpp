#pragma once
// defines: tessera::main<Exp>(argc, argv[, options]), the whole program of an example binary:
//   int main(int argc, char** argv) { return tessera::main<MyExperiment>(argc, argv); }
// Arguments are key=value run-config overrides (--help lists them), and the seeds' keys for what the binary
// fixes (precision=, optim=, act_ckpt=, strategy=, devices=, ...: engine/seed_keys.hpp), which must match it.
// MainOptions give a binary its own defaults and banner (a catalogue entry: catalogue/main.hpp). Exit codes:
// 0 success, 1 a failed run (bad file, runtime error), 2 a bad configuration.
// Under mpirun/srun the program is one rank of a job (a JobScope starts MPI). A rank that fails prints its
// error once and ends the whole job with that exit code (MPI_Abort), so no rank is left waiting in a
// collective. When every rank fails alike (a bad setting), rank 0 speaks for them: the others hold back for
// a moment before aborting, and rank 0's abort ends them first.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <string_view>
#include <vector>

#include <c10/util/Exception.h>

#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/engine/seed_keys.hpp"
#include "tessera/engine/trainer.hpp"

namespace tessera {

// Runs `body` (returning an exit code) and turns an escaping error into its message and exit code; in a
// job of several ranks, into the end of the job (see above).
template <class Body>
int exit_code_of(Body&& body) {
  auto fail = [](int code, const char* what) -> int {
    const JobPlace place = job::place();
    if (place.size == 1) {
      std::fprintf(stderr, "error: %s\n", what);
      return code;
    }
    if (place.rank != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
    job::abort(code, std::string("error: ") + what);
  };
  try {
    return body();
  } catch (const ConfigError& e) {
    return fail(2, e.what());
  } catch (const c10::Error& e) {  // LibTorch's own message, without its C++ backtrace
    return fail(1, e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of host memory (an allocation failed); lower batch_size or seq_len, use activation "
                   "checkpointing, a sharding or offload policy, or a smaller model");
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
}

// The help's last lines: the experiment's model family and the presets `model=` takes.
template <class Model>
std::string family_help() {
  std::string names;
  for (const std::string_view n : Model::preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
  return "\nmodel family: " + std::string(Model::name) + "\nmodel presets: " + names + "\n";
}

// What a binary adds to tessera::main: defaults over RunConfig's, a banner printed first, and --list.
struct MainOptions {
  std::vector<std::string> default_args;  // key=value, applied before the command line's
  std::string banner;                     // printed by rank 0 before the run and atop --help
  std::function<std::string()> list;      // what --list prints; empty: --list is not an option
};

template <class Exp>
int main(int argc, char** argv, const MainOptions& options = {}) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  std::optional<JobScope> job_scope;
  try {
    job_scope.emplace();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return exit_code_of([&] {
    const bool root = job::place().rank == 0;
    if (options.list && std::find(args.begin(), args.end(), "--list") != args.end()) {
      if (root) std::fputs(options.list().c_str(), stdout);
      return 0;
    }
    const std::vector<std::string_view> default_args(options.default_args.begin(), options.default_args.end());
    const RunConfig defaults = parse_args(std::span<const std::string_view>(default_args), RunConfig{});
    const std::vector<SeedChoice> choices = seed_choices<Exp>(job::place().size);
    if (wants_help(args)) {
      if (!root) return 0;
      std::string seed_keys = "\nthe seeds' keys for what this binary fixes (given, each must match):\n";
      for (const SeedChoice& c : choices) seed_keys += "  " + std::string(c.key) + "=" + c.value + "\n";
      std::printf("usage: %s [key=value ...]\n\n%s%s%s%s", argc > 0 ? argv[0] : "tessera",
                  options.banner.empty() ? "" : (options.banner + "\n").c_str(), config_help(defaults).c_str(),
                  seed_keys.c_str(), family_help<typename Exp::model>().c_str());
      return 0;
    }
    const SeedArgs seed_args = split_seed_args(args, choices);
    check_seed_args(seed_args, choices);
    const RunConfig cfg = parse_run_config(seed_args.rest, defaults);
    if (root && !options.banner.empty()) std::printf("%s\n", options.banner.c_str());
    Trainer<Exp> trainer(cfg);
    trainer.run();
    return 0;
  });
}

}  // namespace tessera
