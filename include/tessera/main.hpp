#pragma once
// defines: tessera::main<Exp>(argc, argv[, options]), the whole program of an example binary:
//   int main(int argc, char** argv) { return tessera::main<MyExperiment>(argc, argv); }
// Arguments are key=value run-config overrides (--help lists them), and the seeds' keys for what the binary
// fixes (precision=, optim=, act_ckpt=, strategy=, devices=, ...: engine/seed_keys.hpp), which must match it.
// --dry-run prints the predicted memory per phase and FITS / DOES NOT FIT for device_memory= (predict/dry_run.hpp)
// instead of training, for devices= ranks; a run (predict=true) prints the prediction against the measured peak.
// MainOptions (main_options.hpp) give a binary its own defaults and banner (a catalogue entry: catalogue/main.hpp).
// Exit codes: 0 success, 1 a failed run (bad file, runtime error), 2 a bad configuration, 3 --dry-run predicts it
// does not fit.
// Under mpirun/srun the program is one rank of a job (a JobScope starts MPI, watched by the collective watchdog from
// before MPI starts to after it ends). Its ranks first agree on what they run (engine/run_agreement.hpp): the
// experiment, --help/--dry-run/--list, every run-config value and what each input holds; a rank that differs ends
// the job on every rank with exit code 2, naming the key and both values. A rank that fails prints its
// error once and ends the whole job with that exit code (MPI_Abort), so no rank is left waiting in a
// collective. When every rank fails alike (a bad setting), rank 0 speaks for them: the others hold back for
// a moment before aborting, and rank 0's abort ends them first.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <typeinfo>
#include <vector>

#include <c10/util/Exception.h>

#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/engine/run_agreement.hpp"
#include "tessera/engine/seed_keys.hpp"
#include "tessera/engine/trainer.hpp"
#include "tessera/main_options.hpp"
#include "tessera/predict/dry_run.hpp"
#include "tessera/report/mfu.hpp"

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

// devices= under --dry-run: the number of ranks to predict for.
int dry_run_ranks(std::string_view value);

// The metrics file's "prediction" record: rank 0's predicted bytes per phase (step 1), the peak, the collectives.
nlohmann::json prediction_record(const predict::Prediction& p);

// collective_timeout_s= as given, else its default: read before the arguments are parsed, so that the collective
// watchdog watches MPI's start and the ranks' agreement (a value that does not parse counts as the default here; the
// parse then refuses it).
double launch_timeout_s(std::span<const std::string_view> args);

// --dry-run: prints the prediction and the verdict on rank 0. Exit code 0 when it fits, 3 when it does not.
template <class Exp>
int dry_run_main(const RunConfig& cfg, int ranks, bool root) {
  const c10::DeviceType target = predict::target_of(cfg);
  const std::optional<std::int64_t> limit = predict::device_memory_bytes(cfg, target);
  if (!limit)
    throw ConfigError("device_memory=: this process sees no CUDA device to read the memory of; give the target's, "
                      "e.g. device_memory=80GiB");
  const predict::Prediction p = predict::dry_run<Trainer<Exp>>(cfg, ranks);
  const double peak_flops = cfg.peak_tflops > 0 ? cfg.peak_tflops * 1e12
                            : target == c10::DeviceType::CUDA
                                ? device_peak_flops(c10::Device(c10::DeviceType::CUDA, 0),
                                                    Exp::precision::compute_dtype)
                                      .value_or(0.0)
                                : 0.0;
  const predict::Verdict v = predict::judge(p, *limit);
  if (root) {
    std::fputs(predict::format_prediction(p, cfg, peak_flops).c_str(), stdout);
    std::printf("[predict] %s\n", v.text.c_str());
  }
  return v.fits ? 0 : 3;
}

template <class Exp>
int main(int argc, char** argv, const MainOptions& options = {}) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  std::optional<JobScope> job_scope;
  try {
    job_scope.emplace(launch_timeout_s(args));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return exit_code_of([&] {
    const bool root = job::place().rank == 0;
    // Ranks agree (engine/run_agreement.hpp) before any of them can end early or start a collective alone.
    constexpr std::string_view flags[] = {"--help", "--dry-run", "--list"};
    job::agree("what to run", launch_facts(typeid(Exp), flags, args), kSameArguments);
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
    // --dry-run: the prediction alone, for the job size given by devices= (else the job's own).
    std::vector<std::string_view> rest_args;
    bool dry = false;
    int ranks = job::place().size;
    for (const std::string_view a : args) {
      if (a == "--dry-run") dry = true;
      else rest_args.push_back(a);
    }
    for (const std::string_view a : rest_args)
      if (dry && a.starts_with("devices=")) ranks = dry_run_ranks(a.substr(8));
    const std::vector<SeedChoice> run_choices = dry ? seed_choices<Exp>(ranks) : choices;
    const SeedArgs seed_args = split_seed_args(rest_args, run_choices);
    check_seed_args(seed_args, run_choices);
    const RunConfig cfg = parse_run_config(seed_args.rest, defaults);
    std::vector<job::Fact> settings = run_facts(cfg);
    if (dry) settings.push_back({"devices", std::to_string(ranks), "devices=" + std::to_string(ranks)});
    job::agree("the run config", settings, kSameArguments);
    job::agree("the run's inputs", input_facts(cfg), kSameInputs);
    if (root && !options.banner.empty()) std::printf("%s\n", options.banner.c_str());
    if (dry) return dry_run_main<Exp>(cfg, ranks, root);
    std::optional<predict::Prediction> predicted;
    if (cfg.predict) {
      try {
        predicted = predict::dry_run<Trainer<Exp>>(cfg, job::place().size, job::place().local_size);
      } catch (const Error&) {
        // Bad input (a file, a job shape): the run itself refuses it next, with the same message, once.
      } catch (const std::exception& e) {  // the run itself does not depend on the prediction
        if (root) std::fprintf(stderr, "[predict] no prediction for this run: %s\n", e.what());
      }
    }
    Trainer<Exp> trainer(cfg);
    if (predicted) trainer.record_prediction(prediction_record(*predicted));
    trainer.run(predicted ? std::optional<std::int64_t>(predicted->device_peak()) : std::nullopt);
    return 0;
  });
}

}  // namespace tessera
