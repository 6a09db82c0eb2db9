#pragma once
// defines: Trainer<Exp>'s training-state checkpoints (engine/train_state.hpp holds the files and the protocol).
// What a checkpoint holds, each part from its owner:
//   the store      every unit's parameters, cut at this rank's shard ("<unit>.param"), for all units (frozen ones
//                  too: freeze= and the adapters' base are rebuilt from model_dir and the seed, never trained)
//   OptimizerStep  the offload masters, the optimizer's state, its step count, the loss scaler
//   the trainer    the step (the data's position: batches are a function of the step, and dropout masks of the
//                  seed, step, micro-step, rank and call, so no generator state exists to save)
// Included at the end of trainer.hpp.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/param_spec.hpp"
#include "tessera/engine/train_state.hpp"
#include "tessera/engine/trainer.hpp"

namespace tessera {

namespace detail {
// FNV-1a over the parameters' names and shapes: two runs with this value hold tensors of the same layout.
std::string spec_fingerprint(const std::vector<ParamSpec>& specs);
}  // namespace detail

template <class Exp>
nlohmann::json Trainer<Exp>::train_state_identity() const {
  return {{"experiment",
           {{"family", Model::name},
            {"sharding", Sharding::name},
            {"precision", Precision::name},
            {"optimizer", Optimizer::name},
            {"offload", Offload::name},
            {"adapter", trains_adapters ? Adapter::name : std::string_view("none")}}},
          {"settings",
           {{"parameters", std::to_string(store_.numel()) + " in " + std::to_string(store_.specs().size()) +
                               " tensors, layout " + detail::spec_fingerprint(store_.specs())},
            {"frozen_parameters", adapters_.frozen_numel()},
            {"seq_len", cfg_.seq_len},
            {"seed", cfg_.seed},
            {"data", cfg_.data.empty() ? std::string("synthetic") : cfg_.data},
            {"num_train_samples", cfg_.num_train_samples},
            {"rows_per_step", cfg_.batch_size * cfg_.accumulate_grad_batches * runtime_.world_size}}}};
}

template <class Exp>
train_state::Saved Trainer<Exp>::save_checkpoint(std::int64_t steps_done) {
  if constexpr (!CheckpointableOptimizer<Optimizer>) {
    throw ConfigError("checkpoint_dir=" + cfg_.checkpoint_dir + ": the optimizer " + std::string(Optimizer::name) +
                      " does not list its state (state_tensors, optim/concept.hpp); leave checkpoint_dir empty");
  } else {
    const ShardLayout& layout = store_.layout();
    TrainStateWriter mine(layout.group_rank);
    for (std::size_t u = 0; u < store_.num_units(); ++u)
      mine.add_part(std::to_string(u) + ".param", store_.shard(u), store_.shard_offset(u), store_.unit_numel(u));
    nlohmann::json manifest = train_state_identity();
    update_.save_state(mine, manifest);
    manifest["world_size"] = runtime_.world_size;
    manifest["shard_group_size"] = layout.group_size;
    manifest["units"] = store_.num_units();
    // The first replica writes: the ranks of shard group 0 (groups are consecutive ranks).
    const bool writes = runtime_.rank < layout.group_size;
    const auto start = std::chrono::steady_clock::now();
    train_state::Saved saved;
    try {
      saved = train_state::save(cfg_.checkpoint_dir, steps_done, mine, writes, std::move(manifest),
                                engine_.comms().world, runtime_.device, cfg_.keep_last);
    } catch (const std::exception& e) {
      const std::optional<std::filesystem::path> last = train_state::newest(cfg_.checkpoint_dir);
      throw Error("checkpoint_dir=" + cfg_.checkpoint_dir + ": " + e.what() + "; nothing of step " +
                  std::to_string(steps_done) + " was kept, and " +
                  (last ? "the newest complete checkpoint, " + last->string() + ", is intact (resume=auto continues "
                          "from it)"
                        : std::string("no earlier checkpoint exists")) +
                  "; free space there or give another checkpoint_dir");
    }
    char line[160];
    std::snprintf(line, sizeof line, "[checkpoint] step %lld: %s (%.1f MiB, %.2f s)",
                  static_cast<long long>(steps_done), saved.path.string().c_str(),
                  static_cast<double>(saved.bytes) / (1 << 20),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    reporter_.print(line);
    return saved;
  }
}

template <class Exp>
std::int64_t Trainer<Exp>::resume_from(const std::filesystem::path& dir) {
  const auto agree = [&](const std::optional<std::string>& mine) {
    if (auto failure = train_state::first_failure(engine_.comms().world, runtime_.device, mine)) throw Error(*failure);
  };
  if constexpr (!CheckpointableOptimizer<Optimizer>) {
    throw ConfigError("resume=" + cfg_.resume + ": the optimizer " + std::string(Optimizer::name) +
                      " does not list its state (state_tensors, optim/concept.hpp); leave resume empty");
  } else {
    const std::string key = "resume=" + (cfg_.resume == "auto" ? dir.string() : cfg_.resume) + ": ";
    std::optional<TrainStateReader> reader;
    std::optional<std::string> failure;
    try {
      reader.emplace(dir);
      const nlohmann::json& m = reader->manifest();
      if (auto diff = train_state::difference(m, train_state_identity()))
        throw ConfigError(*diff + "; resume it with the binary and settings that wrote it (its manifest.json lists "
                                  "them), or start anew without resume");
      const std::int64_t group = m.value("shard_group_size", std::int64_t{0});
      if (decltype(update_)::has_local_state() && group != store_.layout().group_size)
        throw ConfigError("the optimizer " + std::string(Optimizer::name) + " keeps its state in blocks of each shard, "
                          "and this checkpoint was cut for shard groups of " + std::to_string(group) + " rank(s) ("
                          + std::to_string(m.value("world_size", 0)) + " in all), this run's for " +
                          std::to_string(store_.layout().group_size) + "; resume it on that many ranks");
      if (reader->step() > total_steps())
        throw ConfigError("the checkpoint is at step " + std::to_string(reader->step()) + ", past this run's " +
                          std::to_string(total_steps()) + " steps; raise max_steps (or max_epochs) to continue it");
    } catch (const std::exception& e) {
      failure = key + e.what();
    }
    agree(failure);
    try {
      at::NoGradGuard no_grad;
      for (std::size_t u = 0; u < store_.num_units(); ++u)
        reader->read_part(std::to_string(u) + ".param", store_.flat_param(u),
                          store_.layout().store_shards ? store_.shard_offset(u) : 0, store_.unit_numel(u));
      update_.load_state(*reader);
    } catch (const std::exception& e) {
      failure = key + e.what();
    }
    agree(failure);
    reporter_.print("[checkpoint] resumed from " + dir.string() + " at step " + std::to_string(reader->step()) +
                    " (written by " + std::to_string(reader->manifest().value("world_size", 0)) + " rank(s))");
    return reader->step();
  }
}

}  // namespace tessera
