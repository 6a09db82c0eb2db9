#pragma once
// defines: Trainer<Exp>, the wiring of one experiment and its step loop, on one rank or many.
//
// One optimizer step (step s), on every rank r of W:
//   for micro m in 0..A-1:  batch <- the data's rows (s, m, r)                                   [before_fwd]
//                           loss  <- Model::forward: the family's program, call by call, through
//                                    the engine (engine/unit_engine.hpp)                          [after_fwd]
//                           backward(loss * 1/A [* loss scale]); gradients reduced as the sharding
//                           policy says                                                           [after_bwd]
//   the optimizer step on each trainable unit's buffer or shard (engine/optimizer_step.hpp)       [after_opt]
// Who owns what: the family its shapes, units and program (models/model_family.hpp); the engine where
// parameters, gradients and shards live; OptimizerStep the update, loss scaling and offload; the adapter runtime
// the frozen base and LoRA (engine/adapter_runtime.hpp); MemoryProbe the per-phase table; experiment_table.hpp
// what the run prints first. The loss reported is the mean over ranks, so W ranks of B rows report what one rank
// of W*B rows does.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/checkpoint/no_checkpoint.hpp"
#include "tessera/data/data_for.hpp"
#include "tessera/engine/adapter_runtime.hpp"
#include "tessera/engine/block_selection.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/engine/job_shape.hpp"
#include "tessera/engine/memory_probe.hpp"
#include "tessera/engine/optimizer_step.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/runtime.hpp"
#include "tessera/engine/train_state.hpp"
#include "tessera/engine/unit_engine.hpp"
#include "tessera/experiment.hpp"
#include "tessera/dist/watchdog.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/report/mfu.hpp"
#include "tessera/report/reporter.hpp"
#include "tessera/report/timeline.hpp"
#include <nlohmann/json.hpp>

namespace tessera {

struct RunSummary {
  double train_s = 0.0;
  std::int64_t peak_bytes = 0;  // highest over ranks
  std::vector<StepResult> steps;
};

template <class Exp>
class Trainer {
 public:
  using Model = typename Exp::model;
  using Sharding = typename Exp::sharding;
  using Precision = typename Exp::precision;
  using Checkpointing = typename Exp::checkpointing;
  using Optimizer = typename Exp::optimizer;
  using Offload = typename Exp::offload;
  using Adapter = typename Exp::adapter;
  using ModelConfig = typename Model::Config;
  using Batch = typename Model::Batch;
  using Data = typename data::DataFor<Batch>::type;
  using Adapters = AdapterRuntimeOf<Model, Adapter, Precision>;
  static constexpr int stage = sharding_stage<Sharding>;
  static constexpr bool offloads_optimizer = Offload::offloads_optimizer;
  static constexpr bool offloads_parameters = Offload::offloads_parameters;
  static constexpr bool trains_adapters = Adapter::trains_adapters;
  // What the store keeps: the parameter dtype; the compute dtype when the fp32 master lives on the CPU
  // (OffloadOptimizer); fp32 shards in host memory under OffloadParams (they are the master).
  static constexpr c10::ScalarType store_dtype =
      offloads_parameters ? c10::ScalarType::Float
                          : offloads_optimizer ? Precision::compute_dtype : Precision::param_dtype;

  // Not copyable or movable: the engine's call function points into the trainer.
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  explicit Trainer(RunConfig cfg, ReportOptions report = {})
      : cfg_(checked_step_in_backward(with_global_batch(std::move(cfg), job::place().size))),
        place_(job::place()),
        group_size_(tessera::shard_group_size<Sharding>(cfg_, place_)),
        runtime_(make_runtime(cfg_, place_)),
        gemm_(choose_gemm(cfg_.cpu_lowp, Precision::compute_dtype, runtime_.device, cfg_.loss_blocks)),
        model_(cfg_.model_dir.empty() ? Model::preset(cfg_.model)
                                      : Model::read_config(std::filesystem::path(cfg_.model_dir) / "config.json")),
        units_(Model::units(model_)),
        weights_(open_weights(cfg_, model_)),
        data_(cfg_, Model::data_spec(model_), runtime_.world_size),
        adapters_(cfg_, model_, weights_, runtime_.device),
        store_(adapters_.store_specs(), store_dtype, offloads_parameters ? host_of(runtime_.device) : runtime_.device,
               ShardLayout{group_size_, place_.rank % group_size_, stage == 3},
               offloads_parameters && runtime_.device.is_cuda(), units_.size()),
        context_(Model::make_context(model_, cfg_.seq_len, Precision::compute_dtype, runtime_.device)),
        engine_(store_, shard_plan<Sharding, Precision>(cfg_, runtime_.device),
                traced(cfg_, job::communicators(static_cast<int>(group_size_), runtime_.device)), unit_calls(),
                [this](std::size_t c, std::span<const at::Tensor> inputs, const std::vector<std::vector<at::Tensor>>& p) {
                  return adapters_.compute(context_, c, inputs, p, position_, gemm_.gemm);
                },
                frozen_units(), wrapped()),
        reporter_(cfg_.metrics.empty() || runtime_.rank != 0 ? MetricsWriter() : MetricsWriter(cfg_.metrics),
                  ReportOptions{report.print && runtime_.rank == 0, cfg_.log_every, report.print_config,
                                report.progress && runtime_.world_size == 1}),
        probe_(cfg_, runtime_, reporter_),
        update_(filled_engine(), store_, cfg_.optimizer_in_backward) {
    position_.rank = runtime_.rank;
  }

  const RunConfig& config() const { return cfg_; }
  const ModelConfig& model_config() const { return model_; }
  const Runtime& runtime() const { return runtime_; }
  // How the run's matrix products run (cpu_lowp=), and why.
  const GemmChoice& gemm() const { return gemm_; }
  const JobPlace& place() const { return place_; }
  ParamStore& params() { return store_; }
  const ParamStore& params() const { return store_; }
  const UnitEngine& engine() const { return engine_; }
  const Data& data() const { return data_; }
  const Adapters& adapters() const { return adapters_; }
  std::int64_t total_steps() const { return data_.total_steps(); }
  std::int64_t shard_group_size() const { return group_size_; }
  std::int64_t tokens_per_step() const { return data_.tokens_per_step(); }
  // The learning rate in use: lr, times the number of ranks under lr_scaling=linear.
  double lr() const {
    return cfg_.lr * (cfg_.lr_scaling == LrScaling::linear ? static_cast<double>(runtime_.world_size) : 1.0);
  }
  double weight_decay() const { return cfg_.weight_decay.value_or(Optimizer::default_weight_decay); }
  const LossScaler& loss_scaler() const { return update_.scaler(); }
  const std::vector<memory::MemorySnapshot>& snapshots() const { return probe_.snapshots(); }
  const std::vector<memory::MemorySnapshot>& job_snapshots() const { return probe_.job_snapshots(); }
  std::int64_t optimizer_bytes() const { return update_.state_bytes(); }
  // The gradient the optimizer will use for `unit` (the whole unit, or this rank's shard); undefined
  // between optimizer steps and for frozen units.
  const at::Tensor& flat_grad(std::size_t unit) const { return engine_.grad_slice(unit); }
  // OffloadOptimizer/OffloadParams: the host side (masters, gradient copies); nullptr otherwise.
  const CpuOffload* cpu_offload() const { return update_.offload(); }
  // Lora/QLora: the frozen base (nullptr otherwise), the adapter settings and the adapted linears.
  const FrozenBase* frozen_base() const {
    if constexpr (trains_adapters) return &adapters_.base();
    else return nullptr;
  }
  // Every unit's full parameters (padded flat buffers). Collective under FullShard/HybridShard.
  std::vector<at::Tensor> full_params() { return engine_.full_params(); }

  // The loss of one batch (this rank's rows), through the engine: the family's program.
  at::Tensor forward(const Batch& batch) { return Model::forward(model_, engine_, batch); }
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& targets)
    requires std::same_as<Batch, models::TokenBatch>
  {
    return forward(models::TokenBatch{tokens, targets});
  }

  // Forward and backward of every micro-batch of `step`; gradients stay allocated, reduced across ranks.
  // Returns the mean loss over micro-batches and ranks.
  double accumulate_gradients(std::int64_t step) {
    const std::int64_t accumulate = cfg_.accumulate_grad_batches;
    const double micro_weight = 1.0 / static_cast<double>(accumulate);
    at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(runtime_.device));
    for (std::int64_t m = 0; m < accumulate; ++m) {
      const timeline::Scope timed(timeline::Kind::micro_step, m);
      position_.step = step;
      position_.micro = m;
      const Batch batch = data_.batch(step, m, runtime_.rank, runtime_.device);
      probe(step, m, memory::Phase::before_forward);
      engine_.begin_micro(m + 1 == accumulate);
      if (m + 1 == accumulate && cfg_.optimizer_in_backward) update_.arm(step_hyper());
      at::Tensor loss = forward(batch);
      probe(step, m, memory::Phase::after_forward);
      (loss * (micro_weight * update_.loss_scale())).backward();
      loss_sum += loss.detach().to(at::kDouble);
      loss = at::Tensor();
      if (m + 1 == accumulate) engine_.finish_gradients();
      probe(step, m, memory::Phase::after_backward);
    }
    return mean_over_ranks(loss_sum * micro_weight);
  }

  // One optimizer step on the accumulated gradients, then frees them. Returns false when loss scaling
  // found inf/nan gradients (on any rank) and skipped the update.
  bool apply_gradients() {
    const timeline::Scope timed(timeline::Kind::optimizer);
    const bool applied = update_.apply(step_hyper());
    engine_.release_grads();
    return applied;
  }

  StepResult train_step(std::int64_t step) {
    const timeline::Scope timed(timeline::Kind::step, step);
    dist::watchdog::set_step(step);
    const auto start = std::chrono::steady_clock::now();
    StepResult r;
    r.step = step;
    r.lr = lr();
    r.loss_scale = Precision::loss_scaling ? update_.loss_scale() : 0.0;
    r.loss = accumulate_gradients(step);
    r.skipped = !apply_gradients();
    // The same on every rank (the loss is the mean over ranks), so all ranks stop together. Under fp16
    // loss scaling a skipped step is the scaler's business; anything else that is not finite ends the run.
    if (!std::isfinite(r.loss) && !r.skipped && !runtime_.device.is_meta())  // a dry run has no values
      throw Error("step " + std::to_string(step + 1) + ": the loss is " +
                  (std::isnan(r.loss) ? "NaN" : r.loss > 0 ? "+Inf" : "-Inf") +
                  "; training diverged (lower lr=" + detail::format_value(cfg_.lr) +
                  ", use a precision with more range, or check the data); nothing was saved");
    probe(step, cfg_.accumulate_grad_batches - 1, memory::Phase::after_optimizer_step);
    r.tokens = tokens_per_step();
    r.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    r.mfu = mfu(step_flops(), r.step_ms / 1000.0, runtime_.world_size, peak_flops_per_device());
    return r;
  }

  // The model FLOPs of one optimizer step, all ranks together: the family's training FLOPs per token
  // (report/mfu.hpp: 6 per matmul weight plus attention) times the tokens of the step; 0 when the family does not
  // count them. Recomputation under checkpointing is not added and frozen weights are not discounted (MFU, not HFU).
  double step_flops() const {
    if constexpr (counts_training_flops<Model> && std::same_as<Batch, models::TokenBatch>)
      return model_.training_flops_per_token(cfg_.seq_len) * static_cast<double>(tokens_per_step());
    else
      return 0.0;
  }
  // peak_tflops= when given, else the device's peak for the compute dtype (0 when tessera does not know it).
  double peak_flops_per_device() const {
    if (cfg_.peak_tflops > 0) return cfg_.peak_tflops * 1e12;
    if (!device_peak_) device_peak_ = device_peak_flops(runtime_.device, Precision::compute_dtype).value_or(0.0);
    return *device_peak_;
  }

  // Training-state checkpoints (engine/train_state.hpp, implemented in engine/trainer_state.hpp). Collective.
  // save_checkpoint: checkpoint_dir/step-<steps_done>. resume_from: restores a checkpoint and returns its step.
  train_state::Saved save_checkpoint(std::int64_t steps_done);
  std::int64_t resume_from(const std::filesystem::path& dir);
  // What a checkpoint must match to be resumed by this experiment: its policies and the settings that fix the
  // state's shapes and the data's order.
  nlohmann::json train_state_identity() const;

  // The whole run: config table, steps, memory tables, final save, done record. predicted_peak (the dry run's,
  // predict/dry_run.hpp): printed against the measured peak at the end and kept in the done record.
  RunSummary run(std::optional<std::int64_t> predicted_peak = std::nullopt);
  // Writes the prediction's record to the metrics file, after the run record (rank 0).
  void record_prediction(nlohmann::json record) { prediction_ = std::move(record); }
  // The config table followed by the experiment (policies, model size, data) table.
  std::string describe() const;
  // The metrics file's "run" record: the model, each policy's name, the ranks and the batch shape.
  nlohmann::json run_record() const;

 private:
  StepHyper step_hyper() const { return StepHyper{lr(), weight_decay(), cfg_.beta1, cfg_.beta2}; }

  // optimizer_in_backward=true where this experiment's updates can run unit by unit during backward.
  static RunConfig checked_step_in_backward(RunConfig cfg) {
    using Update = OptimizerStep<Optimizer, Precision, Offload>;
    if (cfg.optimizer_in_backward && !Update::can_step_in_backward)
      throw ConfigError(
          "optimizer_in_backward=true: " +
          (Precision::loss_scaling
               ? "this experiment's precision (" + std::string(Precision::name) + ") scales the loss, and its scaler "
                 "must see every gradient (an inf anywhere skips the whole step) before any update"
               : "this experiment offloads (" + std::string(Offload::name) + "), whose host-side update already "
                 "overlaps backward") +
          "; leave optimizer_in_backward=false");
    return cfg;
  }

  // The store's first values, before the optimizer side copies them (offload masters); model_dir's weights are
  // closed then. Returns the engine, for OptimizerStep.
  UnitEngine& filled_engine() {
    adapters_.fill(store_, weights_);
    weights_.reset();
    return engine_;
  }

  // The family's calls, each checkpointed when it runs a block of a type checkpoint_blocks names and the policy
  // picks it (the k-th such call is block k).
  std::vector<UnitCall> unit_calls() const {
    if constexpr (std::is_same_v<Checkpointing, NoCheckpoint>)
      if (cfg_.checkpoint_blocks != "all")
        throw ConfigError("checkpoint_blocks=" + cfg_.checkpoint_blocks +
                          ": this experiment checkpoints nothing (NoCheckpoint); build it with CheckpointEveryBlock "
                          "or CheckpointEveryNth<N>, or leave checkpoint_blocks=all");
    const std::vector<bool> counted = checkpointed_blocks(cfg_.checkpoint_blocks, units_, Model::name);
    std::vector<UnitCall> out;
    std::size_t block = 0;
    for (const models::CallInfo& c : Model::calls(model_)) {
      const bool is_block = !c.units.empty() && c.units[0] < units_.size() && counted[c.units[0]];
      out.push_back(UnitCall{c.units, is_block && Checkpointing::checkpointed(block)});
      if (is_block) ++block;
    }
    return out;
  }

  // Stages 2/3: which units are FSDP units of their own (wrap_blocks); the others are the root.
  std::vector<bool> wrapped() const {
    if constexpr (stage >= 2) {
      return wrapped_units(cfg_.wrap_blocks, units_, Model::name);
    } else {
      if (cfg_.wrap_blocks != "all")
        throw ConfigError("wrap_blocks=" + cfg_.wrap_blocks + ": FSDP units exist under ShardGradOp, FullShard and "
                          "HybridShard only, and this experiment's sharding is " + std::string(Sharding::name) +
                          "; leave wrap_blocks=all");
      return {};
    }
  }

  // The units freeze= names (and any the family marks frozen); none under an adapter, where the whole base is
  // frozen already and the adapters are what trains.
  std::vector<bool> frozen_units() const {
    if constexpr (trains_adapters) {
      if (cfg_.freeze != "none")
        throw ConfigError("freeze=" + cfg_.freeze + ": under Lora/QLora the whole base model "
                          "is frozen already and only the adapters train; leave freeze=none (choose the adapted "
                          "modules with lora_targets)");
      return {};
    } else {
      std::vector<bool> frozen = tessera::frozen_units(cfg_.freeze, units_, Model::name);
      for (std::size_t u = 0; u < units_.size(); ++u) frozen[u] = frozen[u] || units_[u].frozen;
      return frozen;
    }
  }

  // model_dir's weights, opened (headers only) and checked against the model's parameters, so that a
  // config.json claiming other shapes is refused before gigabytes are allocated for them.
  static std::optional<io::CheckpointDir> open_weights(const RunConfig& cfg, const ModelConfig& model) {
    if (cfg.model_dir.empty()) return std::nullopt;
    io::CheckpointDir dir = io::CheckpointDir::open(cfg.model_dir);
    ParamStore::check_loadable(Model::parameters(model), dir);
    return dir;
  }

  // trace=: the engine's collectives report to the timeline (report/timeline.hpp); nothing else changes.
  static UnitComms traced(const RunConfig& cfg, UnitComms comms) {
    if (cfg.trace.empty()) return comms;
    const auto wrap = [](dist::AnyCommunicator c) {
      return c.empty() ? c : dist::AnyCommunicator::of(dist::TracedCommunicator(std::move(c), timeline::collective_sink()));
    };
    return UnitComms{wrap(comms.world), wrap(comms.shard), wrap(comms.replica)};
  }

  // Stops the timeline and gathers every rank's events to rank 0 as one Chrome trace (other ranks: null).
  // Collective: every rank sends as many rows as the busiest one (gather_to_root takes records of one length).
  nlohmann::json gather_trace() const {
    timeline::stop();
    const std::vector<timeline::Event>& mine = timeline::events();
    at::Tensor rows = at::full({1}, static_cast<std::int64_t>(mine.size()),
                               at::TensorOptions().dtype(at::kLong).device(runtime_.device));
    dist::AnyCommunicator world = engine_.comms().world;
    if (world.size() > 1) world.all_reduce(rows, dist::ReduceOp::max);
    const auto n = static_cast<std::size_t>(rows.item<std::int64_t>());
    const std::vector<std::int64_t> all = job::gather_to_root(timeline::encode(mine, n));
    if (runtime_.rank != 0) return nullptr;
    const std::size_t width = n * timeline::encoded_width;
    std::vector<std::vector<timeline::Event>> per_rank(static_cast<std::size_t>(runtime_.world_size));
    for (std::size_t r = 0; width > 0 && r < per_rank.size(); ++r)
      per_rank[r] = timeline::decode(std::span<const std::int64_t>(all).subspan(r * width, width));
    std::vector<std::string> names;
    for (const models::UnitInfo& u : units_) names.push_back(u.module);
    return timeline::chrome_trace(per_rank, names);
  }

  // The mean over ranks of a scalar (every rank gets it), through the engine's world communicator.
  double mean_over_ranks(const at::Tensor& value) const {
    dist::AnyCommunicator world = engine_.comms().world;
    if (world.size() > 1) world.all_reduce(value, dist::ReduceOp::avg);
    if (value.is_meta()) return std::nan("");  // a dry run: shapes only
    return value.item<double>();
  }

  // Each owner reports its bytes: the store (and the frozen base), the engine's gradients, the optimizer's
  // state, and the host side under offload.
  memory::OwnedBytes owned_bytes() const {
    memory::OwnedBytes owned{store_.param_bytes() + adapters_.frozen_bytes(), engine_.grad_bytes(),
                             update_.state_bytes(), 0, 0, 0};
    if constexpr (offloads_optimizer) {
      owned.optim_cpu = owned.optim;
      owned.optim = 0;
      owned.params_cpu = update_.offload()->master_bytes();
      owned.grads_cpu = update_.offload()->grad_bytes();
      if constexpr (offloads_parameters) {
        owned.params_cpu += owned.params;
        owned.params = 0;
      }
    }
    return owned;
  }
  void probe(std::int64_t step, std::int64_t micro, memory::Phase phase) {
    reached_ = Reached{step, micro, phase};
    if (probe_.due(step)) probe_.take(step, micro, phase, owned_bytes());
  }
  // max_memory= ran out: what the run was doing, its memory then, the predicted need and what would fit.
  std::string out_of_memory_report(const c10::Error& e, std::optional<std::int64_t> predicted_peak);

  // Errors of `body`, a step of writing save_dir, name the setting: "save_dir=out: ...".
  template <class Body>
  decltype(auto) naming_save_dir(Body&& body) const {
    try {
      return body();
    } catch (const std::exception& e) {
      throw Error("save_dir=" + cfg_.save_dir + ": " + e.what());
    }
  }

  // save_dir written under its temporary name (rank 0; the gather is collective under FullShard), or nothing.
  std::optional<StagedDir> stage_save() {
    if (cfg_.save_dir.empty()) return std::nullopt;
    std::vector<at::Tensor> full;
    if constexpr (!trains_adapters) full = engine_.full_params();
    if (runtime_.rank != 0) return std::nullopt;
    return naming_save_dir([&] { return adapters_.stage_save(cfg_.save_dir, store_, full); });
  }

  RunConfig cfg_;
  JobPlace place_;
  std::int64_t group_size_;
  Runtime runtime_;
  GemmChoice gemm_;
  ModelConfig model_;
  std::vector<models::UnitInfo> units_;
  std::optional<io::CheckpointDir> weights_;  // model_dir's weights until the store is filled
  Data data_;
  Adapters adapters_;
  ParamStore store_;
  typename Model::Context context_;
  UnitEngine engine_;
  Reporter reporter_;
  MemoryProbe probe_;
  OptimizerStep<Optimizer, Precision, Offload> update_;
  CallPosition position_;
  mutable std::optional<double> device_peak_;  // device_peak_flops, asked once
  nlohmann::json prediction_;                  // record_prediction's, written at the start of run()
  struct Reached {                             // the last phase probe() saw (an out-of-memory report's "where")
    std::int64_t step = 0, micro = 0;
    std::optional<memory::Phase> phase;
  } reached_;
};

}  // namespace tessera

#include "tessera/engine/experiment_table.hpp"
#include "tessera/engine/trainer_state.hpp"
