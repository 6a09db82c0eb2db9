#pragma once
// defines: the seeds' keys for what a tessera binary fixes at compile time, so that a lab's cfg can be pasted
// as arguments:
//   precision  32-true | bf16-true | bf16-mixed | 16-mixed      (Lightning's names; also 32, bf16, 16)
//   optim      adamw | sgd | adam_8bit | deepspeed_cpu          (deepspeed_cpu: AdamW stepping in host memory)
//   act_ckpt   true | false                                     (activation checkpointing)
//   strategy   auto | ddp | deepspeed_stage_1 | deepspeed_stage_2[_offload] | fsdp | deepspeed_stage_3[_offload]
//              | deepspeed_stage_3_offload_optimizer | fsdp_hybrid_shard
//   use_lora / use_qlora  true | false
//   devices    the number of ranks the job was started with
// Each given key must name what the binary is; otherwise the error names the binary's value and what to run
// instead. The binary's values are rows of the [cfg] table (experiment_table.hpp).
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/checkpoint/no_checkpoint.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

struct SeedChoice {
  std::string_view key;
  std::string value;                  // what this binary is, in the seeds' words
  std::vector<std::string> accepted;  // every spelling that means it (value first)
};

namespace detail {

inline std::vector<std::string> spelled(std::initializer_list<std::string_view> names) {
  return {names.begin(), names.end()};
}

std::vector<std::string> precision_names(std::string_view name);
std::vector<std::string> optimizer_names(std::string_view name, bool offloaded);
std::vector<std::string> bool_names(bool value);

template <class S, class O>
std::vector<std::string> strategy_names() {
  if constexpr (S::hybrid) return spelled({"fsdp_hybrid_shard", "hybrid_shard"});
  else if constexpr (S::shards_parameters) {
    if constexpr (O::offloads_parameters) return spelled({"deepspeed_stage_3_offload"});
    else if constexpr (O::offloads_optimizer) return spelled({"deepspeed_stage_3_offload_optimizer"});
    else return spelled({"fsdp", "deepspeed_stage_3", "full_shard"});
  } else if constexpr (S::shards_gradients) {
    if constexpr (O::offloads_optimizer) return spelled({"deepspeed_stage_2_offload"});
    else return spelled({"deepspeed_stage_2", "fsdp_shard_grad_op", "shard_grad_op"});
  } else if constexpr (S::shards_optimizer) return spelled({"deepspeed_stage_1", "zero1"});
  else if constexpr (S::data_parallel) return spelled({"ddp"});
  else return spelled({"auto", "single_device"});
}

}  // namespace detail

// What the experiment type Exp fixes, for a job of `ranks` ranks.
template <class Exp>
std::vector<SeedChoice> seed_choices(std::int64_t ranks) {
  using A = typename Exp::adapter;
  using O = typename Exp::offload;
  const bool checkpoints = !std::is_same_v<typename Exp::checkpointing, NoCheckpoint>;
  const bool lora = A::trains_adapters && !A::quantizes_base;
  const bool qlora = A::trains_adapters && A::quantizes_base;
  auto choice = [](std::string_view key, std::vector<std::string> names) {
    return SeedChoice{key, names.front(), std::move(names)};
  };
  return {choice("precision", detail::precision_names(Exp::precision::name)),
          choice("optim", detail::optimizer_names(Exp::optimizer::name, O::offloads_optimizer)),
          choice("act_ckpt", detail::bool_names(checkpoints)),
          choice("strategy", detail::strategy_names<typename Exp::sharding, O>()),
          choice("use_lora", detail::bool_names(lora)),
          choice("use_qlora", detail::bool_names(qlora)),
          choice("devices", {std::to_string(ranks)})};
}

// The command line split into the seed keys (checked against the binary) and the rest (the run config's).
struct SeedArgs {
  std::vector<std::pair<std::string_view, std::string_view>> given;  // key, value
  std::vector<std::string_view> rest;
};

SeedArgs split_seed_args(std::span<const std::string_view> args, std::span<const SeedChoice> choices);

// Throws a ConfigError naming every seed key whose value is not what the binary is.
void check_seed_args(const SeedArgs& args, std::span<const SeedChoice> choices);

}  // namespace tessera
