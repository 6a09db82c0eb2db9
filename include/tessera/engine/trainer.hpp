#pragma once
// defines: Trainer<Exp>, the training engine every policy plugs into, on one rank or many.
//
// One optimizer step (step s), on every rank r of W:
//   for micro m in 0..A-1:  tokens <- BatchOrder(s, m, r)                          [before_fwd]
//                           loss   <- forward, call by call (embedding, blocks, head) [after_fwd]
//                           backward(loss * 1/A [* loss scale]); gradients reduced as
//                           the sharding policy says (UnitEngine)                    [after_bwd]
//   optimizer step on each unit's flat buffer, or this rank's shard of it (on the CPU under
//   OffloadOptimizer, with the gradients copied there during backward); shards
//   all-gathered (ZeRO-1/2); gradients released                                     [after_opt]
// The engine asks the policies: Sharding for where parameters, gradients and optimizer state live
// (engine/unit_engine.hpp), Precision for dtypes and loss scaling, Checkpointing which blocks to recompute,
// Optimizer for the update; the model family supplies the forward pieces. The loss reported is the mean over
// ranks, so W ranks of B rows report what one rank of W*B rows does.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

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
#include "tessera/data/batch_order.hpp"
#include "tessera/data/token_source.hpp"
#include "tessera/engine/cpu_offload.hpp"
#include "tessera/engine/frozen_base.hpp"
#include "tessera/engine/lora.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/engine/loss_scaler.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/runtime.hpp"
#include "tessera/engine/save.hpp"
#include "tessera/engine/unit_engine.hpp"
#include "tessera/experiment.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/memory/snapshot.hpp"
#include "tessera/report/reporter.hpp"

namespace tessera {

struct RunSummary {
  double train_s = 0.0;
  std::int64_t peak_bytes = 0;  // highest over ranks
  std::vector<StepResult> steps;
};

namespace detail {

// Ranks per shard group for a policy in a job, or ConfigError saying why the job does not suit it.
// The same on every rank (it depends on the config and the job's shape only), so all ranks refuse together.
template <class Sharding>
std::int64_t shard_group_size(const RunConfig& cfg, const JobPlace& place) {
  if constexpr (!Sharding::data_parallel) {
    if (place.size > 1)
      throw ConfigError("sharding " + std::string(Sharding::name) + " runs in one process but this job has " +
                        std::to_string(place.size) +
                        " ranks; launch it without mpirun, or build the experiment with Ddp, Zero1, ShardGradOp, "
                        "FullShard or HybridShard");
    return 1;
  } else if constexpr (!Sharding::shards_optimizer) {
    return 1;
  } else if constexpr (!Sharding::hybrid) {
    return place.size;
  } else {
    const std::int64_t g = cfg.shard_group_size > 0 ? cfg.shard_group_size : place.local_size;
    if (place.size % g != 0) {
      const std::string w = std::to_string(place.size);
      throw ConfigError(cfg.shard_group_size > 0
                            ? "shard_group_size=" + std::to_string(g) + ": does not divide the " + w +
                                  " ranks of this job; choose a divisor of " + w
                            : "shard_group_size=0: the default group, the " + std::to_string(g) +
                                  " ranks of one node, does not divide the " + w +
                                  " ranks of this job (uneven nodes); set shard_group_size to a divisor of " + w);
    }
    return g;
  }
}

c10::ScalarType reduce_dtype_of(const std::string& name);

}  // namespace detail

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
      : cfg_(std::move(cfg)),
        place_(job::place()),
        group_size_(detail::shard_group_size<Sharding>(cfg_, place_)),
        runtime_(make_runtime(cfg_, place_)),
        model_(cfg_.model_dir.empty() ? Model::preset(cfg_.model)
                                      : Model::read_config(std::filesystem::path(cfg_.model_dir) / "config.json")),
        lora_(make_lora_settings(cfg_)),
        sites_(adapted_sites(model_, lora_)),
        weights_(open_weights(cfg_, model_)),
        tokens_(open_tokens(cfg_, model_.vocab_size)),
        order_(tokens_, data::BatchShape{runtime_.world_size, cfg_.batch_size, cfg_.seq_len, cfg_.accumulate_grad_batches},
               cfg_.num_train_samples, cfg_.limit_train_batches),
        total_steps_(order_.total_steps(cfg_.max_epochs, cfg_.max_steps)),
        store_(trains_adapters ? lora_specs(Model::parameters(model_), sites_, lora_.r) : Model::parameters(model_),
               store_dtype, offloads_parameters ? c10::Device(c10::kCPU) : runtime_.device,
               ShardLayout{group_size_, place_.rank % group_size_, stage == 3},
               offloads_parameters && runtime_.device.is_cuda(), Model::num_blocks(model_) + 2),
        context_(Model::make_context(model_, cfg_.seq_len, Precision::compute_dtype, runtime_.device)),
        engine_(store_, plan(), job::communicators(static_cast<int>(group_size_), runtime_.device), calls(),
                [this](std::size_t c, const at::Tensor& x, const at::Tensor& aux,
                       const std::vector<std::vector<at::Tensor>>& p) { return run_call(c, x, aux, p); }),
        reporter_(cfg_.metrics.empty() || runtime_.rank != 0 ? MetricsWriter() : MetricsWriter(cfg_.metrics),
                  ReportOptions{report.print && runtime_.rank == 0, cfg_.log_every, report.print_config}) {
    if constexpr (trains_adapters) {
      build_frozen_base();
      if (cfg_.adapter.empty())
        store_.initialize(model_.initializer_range, static_cast<std::uint64_t>(cfg_.seed));
      else
        load_peft_weights(store_, cfg_.adapter);
    } else if (cfg_.model_dir.empty()) {
      store_.initialize(model_.initializer_range, static_cast<std::uint64_t>(cfg_.seed));
    } else {
      store_.load(*weights_);
    }
    weights_.reset();
    if constexpr (offloads_optimizer) {
      std::vector<at::Tensor> slices;
      for (std::size_t u = 0; u < store_.num_units(); ++u) slices.push_back(engine_.update_slice(u));
      offload_.emplace(slices, offloads_parameters, offloads_parameters ? Precision::compute_dtype : store_dtype,
                       runtime_.device);
      engine_.on_grad_ready([this](std::size_t u) { offload_->grad_ready(u, engine_.grad_slice(u)); });
    }
  }

  const RunConfig& config() const { return cfg_; }
  const ModelConfig& model_config() const { return model_; }
  const Runtime& runtime() const { return runtime_; }
  ParamStore& params() { return store_; }
  const UnitEngine& engine() const { return engine_; }
  const data::TokenSource& tokens() const { return tokens_; }
  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t shard_group_size() const { return group_size_; }
  std::int64_t tokens_per_step() const {
    return runtime_.world_size * cfg_.batch_size * cfg_.seq_len * cfg_.accumulate_grad_batches;
  }
  // The learning rate in use: lr, times the number of ranks under lr_scaling=linear.
  double lr() const { return cfg_.lr * (cfg_.lr_scaling == "linear" ? static_cast<double>(runtime_.world_size) : 1.0); }
  double weight_decay() const { return cfg_.weight_decay.value_or(Optimizer::default_weight_decay); }
  const LossScaler& loss_scaler() const { return scaler_; }
  // This rank's snapshots so far (steps 0, 1 and every memory_every), in order.
  const std::vector<memory::MemorySnapshot>& snapshots() const { return snapshots_; }
  // On rank 0: every rank's snapshots, in the order taken (rank 0 .. W-1 at each point); empty elsewhere.
  const std::vector<memory::MemorySnapshot>& job_snapshots() const { return job_snapshots_; }
  std::int64_t optimizer_bytes() const {
    std::int64_t n = 0;
    for (const auto& s : opt_state_) n += Optimizer::state_bytes(s);
    return n;
  }
  // The gradient the optimizer will use for `unit` (the whole unit, or this rank's shard); undefined
  // between optimizer steps.
  const at::Tensor& flat_grad(std::size_t unit) const { return engine_.grad_slice(unit); }
  // OffloadOptimizer/OffloadParams: the host side (masters, gradient copies); nullptr otherwise.
  const CpuOffload* cpu_offload() const { return offload_ ? &*offload_ : nullptr; }
  // Lora/QLora: the frozen base (nullptr otherwise), the adapter settings and the adapted linears.
  const FrozenBase* frozen_base() const { return base_ ? &*base_ : nullptr; }
  const LoraSettings& lora() const { return lora_; }
  const std::vector<LoraSite>& lora_sites_used() const { return sites_; }
  // Every unit's full parameters (padded flat buffers). Collective under FullShard/HybridShard.
  std::vector<at::Tensor> full_params() { return engine_.full_params(); }

  // The loss of one batch, forward only (this rank's rows). tokens/targets: (B, T) int64 on the device.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& targets) {
    at::Tensor x = engine_.call(0, tokens);
    const std::size_t blocks = Model::num_blocks(model_);
    for (std::size_t b = 0; b < blocks; ++b) x = engine_.call(b + 1, x);
    return engine_.call(blocks + 1, x, targets);
  }

  // Forward and backward of every micro-batch of `step`; gradients stay allocated, reduced across ranks.
  // Returns the mean loss over micro-batches and ranks.
  double accumulate_gradients(std::int64_t step) {
    const std::int64_t accumulate = cfg_.accumulate_grad_batches;
    const double micro_weight = 1.0 / static_cast<double>(accumulate);
    at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(runtime_.device));
    for (std::int64_t m = 0; m < accumulate; ++m) {
      step_ = step;
      micro_ = m;
      auto [inputs, targets] = batch(step, m);
      snapshot(step, m, memory::Phase::before_forward);
      engine_.begin_micro(m + 1 == accumulate);
      at::Tensor loss = forward(inputs, targets);
      snapshot(step, m, memory::Phase::after_forward);
      const double scale = Precision::loss_scaling ? scaler_.scale() : 1.0;
      (loss * (micro_weight * scale)).backward();
      loss_sum += loss.detach().to(at::kDouble);
      loss = at::Tensor();
      if (m + 1 == accumulate) engine_.finish_gradients();
      snapshot(step, m, memory::Phase::after_backward);
    }
    return job::mean_over_ranks(loss_sum.item<double>() * micro_weight);
  }

  // One optimizer step on the accumulated gradients, then frees them. Returns false when loss scaling
  // found inf/nan gradients (on any rank) and skipped the update.
  bool apply_gradients() {
    at::NoGradGuard no_grad;
    if constexpr (offloads_optimizer) offload_->wait_grads();
    bool finite = true;
    if constexpr (Precision::loss_scaling) {
      const double inv_scale = 1.0 / scaler_.scale();
      bool local = true;
      for (std::size_t u = 0; u < store_.num_units(); ++u) {
        const at::Tensor g = step_grad(u);
        g.mul_(inv_scale);
        local = local && at::isfinite(g).all().template item<bool>();
      }
      finite = scaler_.update(job::mean_over_ranks(local ? 0.0 : 1.0) == 0.0);
    }
    if (finite) {
      if (opt_state_.empty()) {  // state appears at the first step, as in torch.optim
        for (std::size_t u = 0; u < store_.num_units(); ++u) opt_state_.push_back(init_state(u));
      }
      const StepHyper hyper{lr(), weight_decay()};
      for (std::size_t u = 0; u < store_.num_units(); ++u) {
        at::Tensor slice = engine_.update_slice(u);
        if constexpr (offloads_optimizer) {
          bool filled = false;
          if constexpr (CpuFusedOptimizer<Optimizer>)
            filled = Optimizer::cpu_step(opt_state_[u], offload_->master(u), offload_->grad(u), hyper,
                                         offload_->staging(u));
          else
            Optimizer::step(opt_state_[u], offload_->master(u), offload_->grad(u), hyper);
          offload_->push(u, slice, filled);
        } else {
          Optimizer::step(opt_state_[u], slice, engine_.grad_slice(u), hyper);
        }
      }
      if constexpr (offloads_optimizer) offload_->finish_push();
      engine_.sync_params();
    }
    engine_.release_grads();
    return finite;
  }

  StepResult train_step(std::int64_t step) {
    const auto start = std::chrono::steady_clock::now();
    StepResult r;
    r.step = step;
    r.lr = lr();
    r.loss_scale = Precision::loss_scaling ? scaler_.scale() : 0.0;
    r.loss = accumulate_gradients(step);
    r.skipped = !apply_gradients();
    // The same on every rank (the loss is the mean over ranks), so all ranks stop together. Under fp16
    // loss scaling a skipped step is the scaler's business; anything else that is not finite ends the run.
    if (!std::isfinite(r.loss) && !r.skipped)
      throw Error("step " + std::to_string(step + 1) + ": the loss is " +
                  (std::isnan(r.loss) ? "NaN" : r.loss > 0 ? "+Inf" : "-Inf") +
                  "; training diverged (lower lr=" + detail::format_value(cfg_.lr) +
                  ", use a precision with more range, or check the data); nothing was saved");
    snapshot(step, cfg_.accumulate_grad_batches - 1, memory::Phase::after_optimizer_step);
    r.tokens = tokens_per_step();
    r.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return r;
  }

  // The whole run: config table, steps, memory tables, final save, done record.
  RunSummary run() {
    if (reporter_.prints_config()) reporter_.print(describe());
    memory::reset_peak(runtime_.device);
    const auto start = std::chrono::steady_clock::now();
    RunSummary summary;
    for (std::int64_t s = 0; s < total_steps_; ++s) {
      summary.steps.push_back(train_step(s));
      reporter_.step(summary.steps.back(), total_steps_);
    }
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::optional<StagedDir> saved = stage_save();
    const std::int64_t own_peak = memory::allocator_stats(runtime_.device).peak;
    std::int64_t peak = own_peak;
    for (std::int64_t p : job::gather_to_root(std::span<const std::int64_t>(&own_peak, 1))) peak = std::max(peak, p);
    nlohmann::json extra = {{"steps", total_steps_},
                            {"world_size", runtime_.world_size},
                            {"tokens_per_s", static_cast<double>(tokens_per_step()) * static_cast<double>(total_steps_) / train_s}};
    if constexpr (Precision::loss_scaling) {
      extra["skipped_steps"] = scaler_.skipped_steps();
      extra["scale_growths"] = scaler_.growths();
      extra["loss_scale"] = scaler_.scale();
    }
    reporter_.done(train_s, peak, extra);
    // Outputs take their names only now that both are complete: no run leaves one without the other.
    if (saved) naming_save_dir([&] { saved->commit(); });
    reporter_.commit();
    char line[200];
    std::snprintf(line, sizeof line, "done: %lld steps in %.2f s | %.1f tok/s | peak %s GiB%s",
                  static_cast<long long>(total_steps_), train_s, extra["tokens_per_s"].template get<double>(),
                  memory::gib(peak).c_str(), runtime_.world_size > 1 ? " (highest rank)" : "");
    reporter_.print(line);
    summary.train_s = train_s;
    summary.peak_bytes = peak;
    return summary;
  }

  // The config table followed by the experiment (policies, model size, data) table.
  std::string describe() const {
    std::string s = config_table(cfg_);
    auto row = [&](std::string_view k, const std::string& v) {
      s += "  " + std::string(k) + std::string(k.size() < 16 ? 16 - k.size() : 1, ' ') + v + "\n";
    };
    s += "experiment\n";
    row("model", std::string(Model::name) + " " + (cfg_.model_dir.empty() ? cfg_.model : cfg_.model_dir) + " (" +
                     std::to_string(trains_adapters ? base_numel() : store_.numel()) + " parameters)");
    std::string sharding = std::string(Sharding::name) + " (ZeRO stage " + std::to_string(stage) + ")";
    if constexpr (stage <= 1)
      sharding += ", " + std::to_string(engine_.num_buckets()) + " gradient bucket(s)";
    if constexpr (stage >= 1) sharding += ", shard group of " + std::to_string(group_size_) + " rank(s)";
    row("sharding", sharding);
    row("precision", std::string(Precision::name));
    row("checkpointing", std::string(Checkpointing::name));
    row("optimizer", std::string(Optimizer::name) + " (lr " + std::to_string(lr()) + " after lr_scaling=" +
                         cfg_.lr_scaling + ", weight_decay " + std::to_string(weight_decay()) + ")");
    if constexpr (trains_adapters) {
      std::string targets;
      for (const auto& t : lora_.targets) targets += (targets.empty() ? "" : ",") + t;
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.3f%%", 100.0 * static_cast<double>(store_.numel()) /
                                                   static_cast<double>(store_.numel() + base_numel()));
      char shape[96];
      std::snprintf(shape, sizeof shape, " r=%lld alpha=%g (scaling %g) dropout=%g on ", static_cast<long long>(lora_.r),
                    lora_.alpha, lora_.scaling(), lora_.dropout);
      row("adapter", std::string(Adapter::name) + shape + targets +
                         " (" + std::to_string(sites_.size()) + " linears; " + std::to_string(store_.numel()) +
                         " trainable parameters, " + pct + ")" +
                         (lora_.source.empty() ? std::string() : ", from " + lora_.source));
    }
    row("offload", offloads_parameters ? std::string("parameters + optimizer in CPU memory (fp32 master shards)")
                   : offloads_optimizer ? std::string("optimizer in CPU memory (fp32 master, fused CPU step)")
                                        : std::string("none"));
    row("device", runtime_.device.str() + ", " + std::to_string(runtime_.threads) + " CPU threads per rank, " +
                      std::to_string(runtime_.world_size) + " rank(s) on " + std::to_string(place_.num_nodes) +
                      " node(s)");
    row("data", std::string(tokens_.description()));
    row("steps", std::to_string(total_steps_) + " (" + std::to_string(order_.steps_per_epoch()) + " per epoch, " +
                     std::to_string(tokens_per_step()) + " tokens per step)");
    return s;
  }

 private:
  // Optimizer state for unit u's update slice: on the CPU master under offload (always fp32 there).
  typename Optimizer::State init_state(std::size_t u) {
    const at::Tensor slice = offloads_optimizer ? offload_->master(u) : engine_.update_slice(u);
    const c10::ScalarType dtype = offloads_optimizer ? c10::ScalarType::Float : Precision::optim_state_dtype;
    if constexpr (SegmentAwareOptimizer<Optimizer>) {
      const std::vector<ParamSegment> segments = store_.shard_segments(u);
      return Optimizer::init(slice, dtype, std::span<const ParamSegment>(segments));
    } else {
      return Optimizer::init(slice, dtype);
    }
  }

  // The gradient the optimizer step reads: the host copy under offload, else the device slice.
  at::Tensor step_grad(std::size_t u) {
    if constexpr (offloads_optimizer) return offload_->grad(u);
    else return engine_.grad_slice(u);
  }

  ShardPlan plan() const {
    ShardPlan p;
    p.device = runtime_.device;
    p.stage = stage;
    p.bucket_bytes = static_cast<std::int64_t>(cfg_.bucket_cap_mb * 1024.0 * 1024.0);
    p.compute_dtype = Precision::compute_dtype;
    p.reduce_dtype = detail::reduce_dtype_of(cfg_.reduce_dtype);
    return p;
  }

  // Call 0 the embedding, 1..L the blocks, L+1 the head (with the embedding unit when tied).
  std::vector<UnitCall> calls() const {
    const std::size_t blocks = Model::num_blocks(model_);
    std::vector<UnitCall> out;
    out.push_back(UnitCall{{0}, false});
    for (std::size_t b = 0; b < blocks; ++b) out.push_back(UnitCall{{b + 1}, Checkpointing::checkpointed(b)});
    UnitCall head{{blocks + 1}, false};
    if (Model::head_uses_embedding(model_)) head.units.push_back(0);
    out.push_back(head);
    return out;
  }

  at::Tensor run_call(std::size_t c, const at::Tensor& x, const at::Tensor& aux,
                      const std::vector<std::vector<at::Tensor>>& p) const {
    const std::size_t blocks = Model::num_blocks(model_);
    if constexpr (trains_adapters) {
      if (c == 0) return Model::embed(model_, base_->unit(0), x);
      if (c > blocks) return Model::loss(model_, base_->unit(blocks + 1), base_->unit(0), x, aux);
      // The block's linears: the frozen base (dequantized on the fly under QLora) plus, on the adapted ones,
      // (alpha/r) * dropout(h) A^T B^T with this call's adapter views (A and B of the j-th site at 2j, 2j+1).
      const std::vector<at::Tensor>& ad = p[0];
      const typename Model::LinearFn linear = [&](std::size_t k, const at::Tensor& h) {
        const std::size_t spec = base_->spec_of(c, k);
        at::Tensor y = base_->linear(spec, h);
        const int j = site_index_[spec];
        if (j < 0) return y;
        const at::Tensor in = lora_.dropout > 0 ? lora_dropout(h, lora_.dropout, dropout_seed(c, k)) : h;
        return y + at::linear(at::linear(in, ad[2 * j]), ad[2 * j + 1]) * lora_.scaling();
      };
      return Model::block(model_, context_, base_->unit(c), x, &linear);
    }
    if (c == 0) return Model::embed(model_, p[0], x);
    if (c <= blocks) return Model::block(model_, context_, p[0], x);
    return Model::loss(model_, p[0], p.size() > 1 ? at::TensorList(p[1]) : at::TensorList(), x, aux);
  }

  // model_dir's weights, opened (headers only) and checked against the model's parameters, so that a
  // config.json claiming other shapes is refused before gigabytes are allocated for them.
  static std::optional<io::CheckpointDir> open_weights(const RunConfig& cfg, const ModelConfig& model) {
    if (cfg.model_dir.empty()) return std::nullopt;
    io::CheckpointDir dir = io::CheckpointDir::open(cfg.model_dir);
    ParamStore::check_loadable(Model::parameters(model), dir);
    return dir;
  }

  static LoraSettings make_lora_settings(const RunConfig& cfg) {
    LoraSettings settings;
    if constexpr (trains_adapters) settings = lora_settings(cfg);
    return settings;
  }
  static std::vector<LoraSite> adapted_sites(const ModelConfig& model, const LoraSettings& lora) {
    if constexpr (trains_adapters) {
      const std::vector<ParamSpec> specs = Model::parameters(model);
      return lora_sites(specs, 1, Model::num_blocks(model), lora.targets);
    } else {
      return {};
    }
  }

  // The base parameters (frozen, outside the store) under Lora/QLora: quantized where the policy says, from
  // the preset's initialisation (the same weights a full fine-tuning run starts from) or model_dir.
  void build_frozen_base() {
    constexpr bool quantizes = Adapter::quantizes_base;
    ParamStore base(Model::parameters(model_), quantizes ? c10::ScalarType::Float : Precision::compute_dtype,
                    quantizes ? c10::Device(c10::kCPU) : runtime_.device);
    if (weights_)
      base.load(*weights_);
    else
      base.initialize(model_.initializer_range, static_cast<std::uint64_t>(cfg_.seed));
    const std::size_t blocks = Model::num_blocks(model_);
    std::vector<bool> quantize(base.specs().size(), false);
    for (std::size_t i = 0; i < base.specs().size(); ++i) {
      const ParamSpec& s = base.specs()[i];
      quantize[i] = quantizes && s.shape.size() == 2 && s.unit >= 1 && s.unit <= blocks;
    }
    base_.emplace(base, quantize, Adapter::double_quant, Precision::compute_dtype, runtime_.device);
    site_index_.assign(base.specs().size(), -1);
    std::vector<int> per_unit(base.num_units(), 0);
    for (const LoraSite& site : sites_) site_index_[site.base_spec] = per_unit[base.specs()[site.base_spec].unit]++;
  }

  std::int64_t base_numel() const {
    std::int64_t n = 0;
    if (base_)
      for (const auto& s : base_->specs()) n += s.numel();
    return n;
  }

  // A dropout mask per (seed, rank, step, micro-step, block, linear): recomputation reproduces it, and every rank
  // draws its own for its own rows.
  std::uint64_t dropout_seed(std::size_t call, std::size_t linear) const {
    std::uint64_t h = static_cast<std::uint64_t>(cfg_.seed);
    for (std::uint64_t v : {static_cast<std::uint64_t>(runtime_.rank), static_cast<std::uint64_t>(step_),
                            static_cast<std::uint64_t>(micro_),
                            static_cast<std::uint64_t>(call), static_cast<std::uint64_t>(linear)}) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    return h;
  }

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
    if constexpr (trains_adapters) {
      if (runtime_.rank != 0) return std::nullopt;
      return naming_save_dir([&] { return stage_adapters(cfg_.save_dir); });
    } else {
      const std::vector<at::Tensor> full = engine_.full_params();
      if (runtime_.rank != 0) return std::nullopt;
      return naming_save_dir([&] { return stage_hf_dir<Model>(cfg_.save_dir, model_, store_, full); });
    }
  }

  // save_dir under Lora/QLora: the adapters as a PEFT dir, or (merge_adapter=true) the merged model.
  StagedDir stage_adapters(const std::filesystem::path& dir) const {
    if (!cfg_.merge_adapter) return stage_peft_dir(dir, lora_, store_, cfg_.model_dir.empty() ? cfg_.model : cfg_.model_dir);
    at::NoGradGuard no_grad;
    ParamStore merged(base_->specs(), Precision::compute_dtype, c10::Device(c10::kCPU));
    for (std::size_t u = 0; u < merged.num_units(); ++u) {
      const std::vector<at::Tensor> views = merged.unit_views(u, merged.flat_param(u));
      const std::vector<at::Tensor> adapters = store_.unit_views(u, store_.full_units()[u]);
      for (std::size_t k = 0; k < views.size(); ++k) {
        const std::size_t spec = merged.unit_specs(u)[k];
        at::Tensor w = base_->weight(spec, c10::ScalarType::Float).cpu();
        if (const int j = site_index_[spec]; j >= 0) {
          const at::Tensor a = adapters[2 * j].to(at::kCPU, at::kFloat), b = adapters[2 * j + 1].to(at::kCPU, at::kFloat);
          w = w + at::matmul(b, a) * lora_.scaling();
        }
        views[k].copy_(w);
      }
    }
    return stage_hf_dir<Model>(dir, model_, merged, merged.full_units());
  }

  std::pair<at::Tensor, at::Tensor> batch(std::int64_t step, std::int64_t micro) const {
    const auto options = at::TensorOptions().dtype(at::kLong);
    at::Tensor inputs = at::empty({cfg_.batch_size, cfg_.seq_len}, options);
    at::Tensor targets = at::empty({cfg_.batch_size, cfg_.seq_len}, options);
    const auto n = static_cast<std::size_t>(inputs.numel());
    order_.fill(step, micro, runtime_.rank, std::span<std::int64_t>(inputs.data_ptr<std::int64_t>(), n),
                std::span<std::int64_t>(targets.data_ptr<std::int64_t>(), n));
    return {inputs.to(runtime_.device), targets.to(runtime_.device)};
  }

  bool snapshot_due(std::int64_t step) const { return step <= 1 || step % cfg_.memory_every == 0; }

  // Collective over the job when it has several ranks: rank 0 receives every rank's figures.
  void snapshot(std::int64_t step, std::int64_t micro, memory::Phase phase) {
    if (!snapshot_due(step)) return;
    memory::OwnedBytes owned{store_.param_bytes() + (base_ ? base_->bytes() : 0), engine_.grad_bytes(),
                             optimizer_bytes(), 0, 0, 0};
    if constexpr (offloads_optimizer) {
      owned.optim_cpu = owned.optim;
      owned.optim = 0;
      owned.params_cpu = offload_->master_bytes();
      owned.grads_cpu = offload_->grad_bytes();
      if constexpr (offloads_parameters) {
        owned.params_cpu += owned.params;
        owned.params = 0;
      }
    }
    const auto own = memory::make_snapshot(step, micro, phase, runtime_.rank, owned,
                                           memory::allocator_stats(runtime_.device), runtime_.device.is_cpu());
    snapshots_.push_back(own);
    const bool print_line = micro == 0 || phase == memory::Phase::after_optimizer_step;
    if (runtime_.world_size == 1) {
      reporter_.memory(own, print_line);
      return;
    }
    const auto record = memory::to_record(own);
    const std::vector<std::int64_t> all = job::gather_to_root(record);
    if (runtime_.rank != 0) return;
    std::vector<memory::MemorySnapshot> ranks;
    for (std::size_t k = 0; k * record.size() < all.size(); ++k)
      ranks.push_back(memory::from_record(std::span<const std::int64_t>(all).subspan(k * record.size(), record.size())));
    reporter_.memory_of_ranks(ranks, print_line);
    job_snapshots_.insert(job_snapshots_.end(), ranks.begin(), ranks.end());
  }

  RunConfig cfg_;
  JobPlace place_;
  std::int64_t group_size_;
  Runtime runtime_;
  ModelConfig model_;
  LoraSettings lora_;
  std::vector<LoraSite> sites_;
  std::optional<io::CheckpointDir> weights_;  // model_dir's weights, checked against the model before any allocation
  data::TokenSource tokens_;
  data::BatchOrder order_;
  std::int64_t total_steps_;
  ParamStore store_;
  typename Model::Context context_;
  UnitEngine engine_;
  Reporter reporter_;
  std::optional<CpuOffload> offload_;
  std::optional<FrozenBase> base_;
  std::vector<int> site_index_;  // per base parameter: its index among its unit's adapted linears, or -1
  std::int64_t step_ = 0, micro_ = 0;
  std::vector<typename Optimizer::State> opt_state_;
  LossScaler scaler_;
  std::vector<memory::MemorySnapshot> snapshots_, job_snapshots_;
};

}  // namespace tessera
