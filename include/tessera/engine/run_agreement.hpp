#pragma once
// defines: what every rank of a job must see alike before it trains, as engine/job.hpp's Facts, which
// tessera::main has the ranks agree on (job::agree) before anything else collective:
//   launch_facts(experiment, flags)  the binary's experiment type and the flags that end a program early
//                                    (--help, --dry-run, --list): a rank that alone prints the help would leave
//                                    the others waiting for it
//   run_facts(cfg)                   every run-config key's value (docs/config.md), but the inputs' paths
//   input_facts(cfg)                 model_dir, adapter, data, tokenizer and resume by what they hold
//                                    (io/fingerprint.hpp), not by their paths: copies on each node agree
// A job whose ranks were given other arguments (a wrapper script per rank) or other files then ends on every rank
// in seconds, naming the key and both values, instead of training silently wrong or corrupting memory.
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/engine/job.hpp"

namespace tessera {

// The experiment's type, and each of `flags` given (among `args`) or not.
std::vector<job::Fact> launch_facts(const std::type_info& experiment, std::span<const std::string_view> flags,
                                    std::span<const std::string_view> args);
std::vector<job::Fact> run_facts(const RunConfig& cfg);
std::vector<job::Fact> input_facts(const RunConfig& cfg);

// The messages' advice, one per kind of fact.
inline constexpr std::string_view kSameArguments =
    "every rank of a job must run the same binary with the same arguments (mpirun and srun give each rank the same "
    "command line: check a script that starts each rank its own way)";
inline constexpr std::string_view kSameInputs =
    "every rank must read the same files: give each node the same copy of the model, tokenizer and data (or put "
    "them on a file system every node shares)";

}  // namespace tessera
