#pragma once
// defines: Trainer<Exp>::describe() (the table a run prints first: the config, then the experiment's model,
// policies, device and data), Trainer<Exp>::run_record() (the same facts as the metrics file's first record)
// and Trainer<Exp>::run() (the whole run and its done line). Included by trainer.hpp.
#include <cstdio>
#include <string>
#include <string_view>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "tessera/engine/checkpoint_dir_lock.hpp"
#include "tessera/engine/seed_keys.hpp"
#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/engine/trainer.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/memory/counting_cpu_allocator.hpp"
#include "tessera/predict/dry_run.hpp"

namespace tessera {

template <class Exp>
std::string Trainer<Exp>::describe() const {
  // The seeds' [cfg] table: the run config, then what the binary fixes under the seeds' keys (seed_keys.hpp).
  std::vector<std::pair<std::string, std::string>> fixed;
  for (const SeedChoice& c : seed_choices<Exp>(runtime_.world_size))
    fixed.emplace_back(std::string(c.key), c.value + (c.key == "devices" ? " (ranks)" : " (this binary)"));
  std::string s = "[cfg] " + config_table(cfg_, fixed);
  auto row = [&](std::string_view k, const std::string& v) {
    s += "  " + std::string(k) + std::string(k.size() < 16 ? 16 - k.size() : 1, ' ') + v + "\n";
  };
  s += "experiment\n";
  const std::int64_t trained = store_.numel();
  row("model", std::string(Model::name) + " " + (cfg_.model_dir.empty() ? cfg_.model : cfg_.model_dir) + " (" +
                   std::to_string(trains_adapters ? adapters_.frozen_numel() : trained) + " parameters)");
  if constexpr (!trains_adapters) {
    if (cfg_.freeze != "none") {
      const std::vector<bool> frozen = frozen_units();
      std::int64_t numel = 0;
      for (const ParamSpec& p : Model::parameters(model_))
        if (frozen[p.unit]) numel += p.numel();
      std::size_t units = 0;
      for (bool f : frozen) units += f ? 1 : 0;
      row("frozen", cfg_.freeze + ": " + std::to_string(numel) + " parameters in " + std::to_string(units) +
                        " unit(s), no gradients or optimizer state; " + std::to_string(trained - numel) + " train");
    }
  }
  std::string sharding = std::string(Sharding::name) + " (ZeRO stage " + std::to_string(stage) + ")";
  if constexpr (stage <= 1) sharding += ", " + std::to_string(engine_.num_buckets()) + " gradient bucket(s)";
  if constexpr (stage >= 1) sharding += ", shard group of " + std::to_string(group_size_) + " rank(s)";
  if (runtime_.world_size > 1) {  // a job of one rank reduces nothing
    const std::string reduced = torch_dtype_name(engine_.reduce_dtype());
    // Why the reduction dtype differs from the gradients': the key, FSDP's MixedPrecision (auto), or MPI's fp32.
    const bool chosen = cfg_.reduce_dtype != ReduceDtype::param && cfg_.reduce_dtype != ReduceDtype::auto_;
    const std::string why = chosen                                                ? " (reduce_dtype)"
                            : engine_.reduce_dtype() == engine_.plan().compute_dtype ? " (auto: the compute dtype, as FSDP's MixedPrecision)"
                                                                                   : " (MpiCommunicator adds 16-bit values in fp32)";
    if (engine_.reduce_dtype() == engine_.grad_dtype())
      sharding += ", gradients reduced in " + reduced + " (their own dtype, no copy)";
    else if constexpr (stage <= 1) {
      char mib[32];
      std::snprintf(mib, sizeof mib, "%.1f MiB", static_cast<double>(engine_.reduce_copy_bytes()) / (1 << 20));
      sharding += ", gradients reduced in " + reduced + why + ": a copy of each bucket while it is reduced, up to " +
                  mib + " at once";
    } else
      sharding += ", gradients reduced in " + reduced + why + ": each unit's full gradients in it";
  }
  if constexpr (stage >= 2) {
    const std::size_t root = engine_.root_units().size();
    sharding += ", " + std::to_string(units_.size() - root) + " wrapped unit(s) + a root of " + std::to_string(root) +
                " (wrap_blocks=" + cfg_.wrap_blocks + ")";
  }
  row("sharding", sharding);
  row("precision", std::string(Precision::name) +
                       (gemm_.reason.empty() ? std::string() : "; CPU matrix products: " + gemm_.reason));
  row("checkpointing", std::string(Checkpointing::name));
  row("optimizer", std::string(Optimizer::name) + " (lr " + std::to_string(lr()) + " after lr_scaling=" +
                       detail::format_value(cfg_.lr_scaling) + ", weight_decay " + std::to_string(weight_decay()) + ")");
  if constexpr (trains_adapters) {
    const LoraSettings& lora = adapters_.settings();
    std::string targets;
    for (const auto& t : lora.targets) targets += (targets.empty() ? "" : ",") + t;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.3f%%",
                  100.0 * static_cast<double>(trained) / static_cast<double>(trained + adapters_.frozen_numel()));
    char shape[96];
    std::snprintf(shape, sizeof shape, " r=%lld alpha=%g (scaling %g) dropout=%g on ", static_cast<long long>(lora.r),
                  lora.alpha, lora.scaling(), lora.dropout);
    row("adapter", std::string(Adapter::name) + shape + targets + " (" + std::to_string(adapters_.sites().size()) +
                       " linears; " + std::to_string(trained) + " trainable parameters, " + pct + ")" +
                       (lora.source.empty() ? std::string() : ", from " + lora.source));
  }
  row("offload", offloads_parameters ? std::string("parameters + optimizer in CPU memory (fp32 master shards)")
                 : offloads_optimizer ? std::string("optimizer in CPU memory (fp32 master, fused CPU step)")
                                      : std::string("none"));
  row("device", runtime_.device.str() + ", " + std::to_string(runtime_.threads) + " CPU threads per rank, " +
                    std::to_string(runtime_.world_size) + " rank(s) on " + std::to_string(place_.num_nodes) + " node(s)");
  row("data", std::string(data_.description()));
  row("steps", std::to_string(total_steps()) + " (" + std::to_string(data_.steps_per_epoch()) + " per epoch, " +
                   std::to_string(tokens_per_step()) + " tokens per step)");
  return s;
}

template <class Exp>
nlohmann::json Trainer<Exp>::run_record() const {
  const std::int64_t trained = store_.numel();
  nlohmann::json r = {{"family", Model::name},
                      {"model", cfg_.model_dir.empty() ? cfg_.model : cfg_.model_dir},
                      {"parameters", trains_adapters ? adapters_.frozen_numel() + trained : trained},
                      {"trainable", trained},
                      {"sharding", Sharding::name},
                      {"stage", stage},
                      {"precision", Precision::name},
                      {"checkpointing", Checkpointing::name},
                      {"optimizer", Optimizer::name},
                      {"adapter", trains_adapters ? Adapter::name : std::string_view("none")},
                      {"offload", Offload::name},
                      {"world_size", runtime_.world_size},
                      {"device", runtime_.device.str()},
                      {"batch_size", cfg_.batch_size},
                      {"accumulate_grad_batches", cfg_.accumulate_grad_batches},
                      {"seq_len", cfg_.seq_len},
                      {"tokens_per_step", tokens_per_step()},
                      {"lr", lr()}};
  if (cfg_.freeze != "none") r["freeze"] = cfg_.freeze;
  if (!gemm_.reason.empty()) r["cpu_lowp"] = gemm_.gemm.lowp == ops::Lowp::widen ? "widen" : "native";
  if (gemm_.gemm.loss_block_bytes > 0) r["loss_blocks"] = "on";  // language models' heads (ops/loss.hpp)
  return r;
}

template <class Exp>
std::string Trainer<Exp>::out_of_memory_report(const c10::Error& e, std::optional<std::int64_t> predicted_peak) {
  const std::int64_t limit = cfg_.max_memory.empty() ? 0 : parse_bytes(cfg_.max_memory).value_or(0);
  std::string where = "before the forward pass of step " + std::to_string(reached_.step + 1);
  if (reached_.phase) {
    const std::string at = " of step " + std::to_string(reached_.step + 1) + " (micro-step " +
                           std::to_string(reached_.micro + 1) + " of " + std::to_string(cfg_.accumulate_grad_batches) +
                           ")";
    switch (*reached_.phase) {
      case memory::Phase::before_forward: where = "in the forward pass" + at; break;
      case memory::Phase::after_forward: where = "in the backward pass" + at; break;
      case memory::Phase::after_backward:
        where = reached_.micro + 1 == cfg_.accumulate_grad_batches ? "in the optimizer step" + at
                                                                   : "before the next micro-step's forward pass" + at;
        break;
      case memory::Phase::after_optimizer_step:
        where = "before the forward pass of step " + std::to_string(reached_.step + 2);
        break;
    }
  }
  const memory::OwnedBytes owned = owned_bytes();
  const std::int64_t allocated = memory::allocator_stats(runtime_.device).allocated;
  auto gib = [](std::int64_t b) { return memory::gib(b) + " GiB"; };
  std::string s = "out of memory on rank " + std::to_string(runtime_.rank) + " " + where + ": " +
                  std::string(e.what_without_backtrace()) + "\n  held when it stopped: Params " + gib(owned.params + owned.params_cpu) +
                  " | Grads " + gib(owned.grads + owned.grads_cpu) + " | Optim " + gib(owned.optim + owned.optim_cpu) +
                  " | Acts and buffers " + gib(allocated - owned.params - owned.grads - owned.optim - owned.cpu()) +
                  " | Allocated " + gib(allocated) + " of max_memory=" + cfg_.max_memory;
  if (predicted_peak) s += "\n  predicted need: a peak of " + gib(*predicted_peak) + " per rank (the dry run's)";
  // Changes this binary can make, each predicted by a dry run, cheapest first; the first of each kind that fits.
  std::vector<std::string> fits;
  try {
    const int ranks = static_cast<int>(runtime_.world_size);
    RunConfig split = cfg_;
    split.global_batch_size = 0;
    for (std::int64_t b = cfg_.batch_size / 2; b >= 1; b /= 2) {
      split.batch_size = b;
      split.accumulate_grad_batches = cfg_.accumulate_grad_batches * (cfg_.batch_size / b);
      if (split.accumulate_grad_batches * b != cfg_.accumulate_grad_batches * cfg_.batch_size) continue;
      const std::int64_t peak = predict::dry_run<Trainer<Exp>>(split, ranks, place_.local_size).device_peak();
      if (peak <= limit) {
        fits.push_back("batch_size=" + std::to_string(b) + " accumulate_grad_batches=" +
                       std::to_string(split.accumulate_grad_batches) + " (the same rows per step, more micro-steps): " +
                       gib(peak));
        break;
      }
      if (b == 1) break;
    }
    if constexpr (sharding_stage<Sharding> >= 1)
      for (int more = 2 * ranks; more <= 8 * ranks; more *= 2) {
        const std::int64_t peak = predict::dry_run<Trainer<Exp>>(cfg_, more, place_.local_size).device_peak();
        if (peak <= limit) {
          fits.push_back(std::to_string(more) + " ranks (mpirun -n " + std::to_string(more) + "; " +
                         std::string(Sharding::name) + " shards over them, the global batch grows): " + gib(peak));
          break;
        }
      }
  } catch (const std::exception& p) {
    fits.push_back("(no prediction: " + std::string(p.what()) + ")");
  }
  s += "\n  changes that fit in max_memory=" + cfg_.max_memory + ", cheapest first, with their predicted peak per rank:";
  if (fits.empty()) s += "\n    none of this binary's settings (a smaller batch, more ranks) fits";
  for (const std::string& f : fits) s += "\n    " + f;
  s += "\n  other policies are other binaries, each of whose --dry-run predicts it: activation checkpointing "
       "(CheckpointEveryBlock), bf16-true, 8-bit Adam, CPU offload, LoRA or QLoRA, FullShard over more ranks";
  (void)limit;
  return s;
}

template <class Exp>
RunSummary Trainer<Exp>::run(std::optional<std::int64_t> predicted_peak) {
  if (reporter_.prints_config()) reporter_.print(describe());
  reporter_.start(run_record());
  if (!prediction_.is_null()) reporter_.record(prediction_);
  memory::reset_peak(runtime_.device);
  const auto start = std::chrono::steady_clock::now();
  RunSummary summary;
  const std::int64_t steps = total_steps();
  const std::optional<std::int64_t> limit =
      cfg_.max_memory.empty() ? std::nullopt : parse_bytes(cfg_.max_memory);
  if (limit && !runtime_.device.is_cpu())
    throw ConfigError("max_memory=" + cfg_.max_memory + ": the limit is the CPU's counting allocator's, and this run "
                      "computes on " + runtime_.device.str() + ", whose own memory is its limit; leave max_memory "
                      "empty (device_memory= sizes --dry-run's verdict)");
  if (limit) memory::set_cpu_limit(*limit);
  // The collective watchdog (dist/watchdog.hpp), and preemption: with checkpoint_dir, SIGTERM/SIGUSR1 asks for a
  // checkpoint at the next step boundary (core/partial_files.hpp). Both end with the run, however it ends.
  const bool checkpoints = !cfg_.checkpoint_dir.empty();
  struct Guards {
    Guards(const RunConfig& cfg, const Runtime& rt, bool checkpoints) {
      dist::watchdog::start(cfg.collective_timeout_s, rt.rank, rt.world_size);
      catch_stop_signals(checkpoints, rt.world_size > 1 ? &dist::watchdog::note : nullptr);
    }
    ~Guards() {
      catch_stop_signals(false);
      dist::watchdog::stop();
    }
  } guards(cfg_, runtime_, checkpoints);
  // checkpoint_dir created, proven writable on every rank and locked against a second run, before step 1.
  std::optional<CheckpointDirLock> checkpoint_dir_lock;
  if (checkpoints) checkpoint_dir_lock.emplace(cfg_.checkpoint_dir, engine_.comms().world, runtime_.device);
  std::int64_t first = 0;
  bool held = false;  // checkpoint_dir already holds the step this run starts at
  if (!cfg_.resume.empty()) {
    std::optional<std::filesystem::path> from =
        cfg_.resume == "auto" ? train_state::newest(cfg_.checkpoint_dir) : std::filesystem::path(cfg_.resume);
    if (from) first = resume_from(*from);
    else reporter_.print("[checkpoint] resume=auto: no checkpoint in " + cfg_.checkpoint_dir + " yet; starting at step 0");
    held = from && checkpoints && resolved_path(normalized_path(*from).parent_path()) == resolved_path(cfg_.checkpoint_dir);
  }
  if (!cfg_.trace.empty()) {  // ranks start their clocks together
    if (dist::AnyCommunicator world = engine_.comms().world; world.size() > 1) world.barrier();
    timeline::start(runtime_.device);
  }
  std::int64_t done = first;         // optimizer steps done
  std::int64_t checkpointed = held ? first : -1;  // the last step checkpoint_dir holds from this run
  bool stopped = false;
  try {
    for (std::int64_t s = first; s < steps && !stopped; ++s) {
      summary.steps.push_back(train_step(s));
      reporter_.step(summary.steps.back(), steps);
      done = s + 1;
      if (!checkpoints) continue;
      stopped = any_rank(engine_, stop_requested());  // every rank stops at the same step
      if (stopped || (cfg_.checkpoint_every > 0 && done % cfg_.checkpoint_every == 0)) {
        save_checkpoint(done);
        checkpointed = done;
      }
    }
    if (checkpoints && checkpointed != done) save_checkpoint(done);
    if (done == steps) stopped = false;  // the signal came in the last step: the run is complete
  } catch (const c10::OutOfMemoryError& e) {
    memory::set_cpu_limit(0);
    throw Error(out_of_memory_report(e, predicted_peak));
  }
  memory::set_cpu_limit(0);
  const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const nlohmann::json trace = cfg_.trace.empty() ? nlohmann::json() : gather_trace();
  // A stopped run is not finished: its weights wait for the resumed run to save them.
  std::optional<StagedDir> saved = stopped ? std::nullopt : stage_save();
  const std::int64_t own_peak = memory::allocator_stats(runtime_.device).peak;
  std::int64_t peak = own_peak;
  for (std::int64_t p : job::gather_to_root(std::span<const std::int64_t>(&own_peak, 1))) peak = std::max(peak, p);
  const auto ran = static_cast<std::int64_t>(summary.steps.size());
  nlohmann::json extra = {{"steps", ran},
                          {"world_size", runtime_.world_size},
                          {"tokens_per_s", static_cast<double>(tokens_per_step()) * static_cast<double>(ran) / train_s}};
  if (first > 0) extra["resumed_at"] = first;
  if (stopped) extra["stopped_at"] = done;
  if (step_flops() > 0) {
    extra["flops_per_token"] = step_flops() / static_cast<double>(tokens_per_step());
    // Steps after the first (the first pays for warm-up), or the only one.
    double sum = 0;
    std::int64_t n = 0;
    for (const StepResult& r : summary.steps)
      if (r.mfu > 0 && (r.step > first || ran == 1)) sum += r.mfu, ++n;
    if (n > 0) extra["mfu"] = sum / static_cast<double>(n);
  }
  if constexpr (Precision::loss_scaling) {
    extra["skipped_steps"] = update_.scaler().skipped_steps();
    extra["scale_growths"] = update_.scaler().growths();
    extra["loss_scale"] = update_.scaler().scale();
  }
  if (predicted_peak) extra["predicted_peak"] = *predicted_peak;
  reporter_.done(train_s, peak, extra);
  // Outputs take their names only now that both are complete: no run leaves one without the other.
  if (saved) naming_save_dir([&] { saved->commit(); });
  if (!trace.is_null()) timeline::write_chrome_trace(cfg_.trace, trace);
  reporter_.commit();
  // The seeds' last line, then tessera's figures.
  char line[240];
  std::snprintf(line, sizeof line, "[done] train time: %.2f s | peak memory: %s GiB%s | %lld steps | %.1f tok/s",
                train_s, memory::gib(peak).c_str(), runtime_.world_size > 1 ? " (highest rank)" : "",
                static_cast<long long>(ran), extra["tokens_per_s"].template get<double>());
  std::string done_line = line;
  if (extra.contains("mfu")) {
    std::snprintf(line, sizeof line, " | MFU %.1f%%", 100.0 * extra["mfu"].template get<double>());
    done_line += line;
  }
  reporter_.print(done_line);
  if (predicted_peak && peak > 0) {
    std::snprintf(line, sizeof line, "[predict] peak memory: predicted %s GiB, measured %s GiB (%+.1f%%)",
                  memory::gib(*predicted_peak).c_str(), memory::gib(peak).c_str(),
                  100.0 * (static_cast<double>(*predicted_peak) - static_cast<double>(peak)) / static_cast<double>(peak));
    reporter_.print(line);
  }
  if (stopped)
    reporter_.print("[checkpoint] stopped by a signal after step " + std::to_string(done) + " of " +
                    std::to_string(steps) + "; continue with resume=auto checkpoint_dir=" + cfg_.checkpoint_dir +
                    " (or resume=" + (std::filesystem::path(cfg_.checkpoint_dir) / train_state::step_dir_name(done)).string() + ")");
  summary.train_s = train_s;
  summary.peak_bytes = peak;
  return summary;
}

}  // namespace tessera
