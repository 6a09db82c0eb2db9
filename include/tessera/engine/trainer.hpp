#pragma once
// defines: Trainer<Exp>, the single-process training engine every policy plugs into.
//
// One optimizer step (step s):
//   for micro m in 0..A-1:  tokens <- BatchOrder(s, m)            [before_fwd]
//                           loss   <- forward, unit by unit       [after_fwd]
//                           backward(loss * 1/A [* loss scale])   [after_bwd]
//   optimizer step on each unit's flat buffer; gradients released [after_opt]
// The engine asks the policies: Precision for dtypes and loss scaling, Checkpointing which blocks to
// recompute, Optimizer for the update; the model family supplies the forward pieces.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/batch_order.hpp"
#include "tessera/data/token_source.hpp"
#include "tessera/engine/checkpoint_fn.hpp"
#include "tessera/engine/loss_scaler.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/runtime.hpp"
#include "tessera/engine/save.hpp"
#include "tessera/experiment.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/memory/allocator_stats.hpp"
#include "tessera/memory/snapshot.hpp"
#include "tessera/report/reporter.hpp"

namespace tessera {

struct RunSummary {
  double train_s = 0.0;
  std::int64_t peak_bytes = 0;
  std::vector<StepResult> steps;
};

template <class Exp>
class Trainer {
  static_assert(!Exp::sharding::shards_parameters && !Exp::sharding::shards_gradients &&
                    !Exp::sharding::shards_optimizer,
                "tessera::Trainer: this engine runs unsharded experiments only; use NoShard.");

 public:
  using Model = typename Exp::model;
  using Precision = typename Exp::precision;
  using Checkpointing = typename Exp::checkpointing;
  using Optimizer = typename Exp::optimizer;
  using ModelConfig = typename Model::Config;

  // Not copyable or movable: the block functions and the batch order point into the trainer.
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  explicit Trainer(RunConfig cfg, ReportOptions report = {})
      : cfg_(std::move(cfg)),
        runtime_(make_runtime(cfg_)),
        model_(cfg_.model_dir.empty() ? Model::preset(cfg_.model)
                                      : Model::read_config(std::filesystem::path(cfg_.model_dir) / "config.json")),
        tokens_(open_tokens(cfg_, model_.vocab_size)),
        order_(tokens_, data::BatchShape{runtime_.world_size, cfg_.batch_size, cfg_.seq_len, cfg_.accumulate_grad_batches},
               cfg_.num_train_samples, cfg_.limit_train_batches),
        total_steps_(order_.total_steps(cfg_.max_epochs, cfg_.max_steps)),
        store_(Model::parameters(model_), Precision::param_dtype, runtime_.device),
        context_(Model::make_context(model_, cfg_.seq_len, Precision::compute_dtype, runtime_.device)),
        reporter_(cfg_.metrics.empty() || runtime_.rank != 0 ? MetricsWriter() : MetricsWriter(cfg_.metrics),
                  ReportOptions{report.print && runtime_.rank == 0, cfg_.log_every, report.print_config}) {
    if (cfg_.model_dir.empty()) {
      store_.initialize(model_.initializer_range, static_cast<std::uint64_t>(cfg_.seed));
    } else {
      store_.load(io::CheckpointDir::open(cfg_.model_dir));
    }
    const std::size_t blocks = Model::num_blocks(model_);
    block_fns_.reserve(blocks);
    for (std::size_t b = 0; b < blocks; ++b) {
      block_fns_.push_back([this](const at::Tensor& x, at::TensorList params) {
        return Model::block(model_, context_, compute_copies(params), x);
      });
    }
  }

  const RunConfig& config() const { return cfg_; }
  const ModelConfig& model_config() const { return model_; }
  const Runtime& runtime() const { return runtime_; }
  ParamStore& params() { return store_; }
  const data::TokenSource& tokens() const { return tokens_; }
  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t tokens_per_step() const {
    return runtime_.world_size * cfg_.batch_size * cfg_.seq_len * cfg_.accumulate_grad_batches;
  }
  double lr() const { return cfg_.lr; }
  double weight_decay() const { return cfg_.weight_decay.value_or(Optimizer::default_weight_decay); }
  const LossScaler& loss_scaler() const { return scaler_; }
  // Every snapshot taken so far (steps 0, 1 and every memory_every), in order.
  const std::vector<memory::MemorySnapshot>& snapshots() const { return snapshots_; }
  std::int64_t optimizer_bytes() const {
    std::int64_t n = 0;
    for (const auto& s : opt_state_) n += Optimizer::state_bytes(s);
    return n;
  }

  // The loss of one batch, forward only, unit by unit. tokens/targets: (B, T) int64 on the device.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& targets) {
    const std::vector<at::Tensor> embed = compute_copies(store_.unit_params(0));
    at::Tensor x = Model::embed(model_, embed, tokens);
    for (std::size_t b = 0; b < block_fns_.size(); ++b) {
      const auto& params = store_.unit_params(b + 1);
      x = Checkpointing::checkpointed(b) ? checkpointed_call(block_fns_[b], x, params) : block_fns_[b](x, params);
    }
    const std::vector<at::Tensor> head = compute_copies(store_.unit_params(block_fns_.size() + 1));
    return Model::loss(model_, head, embed, x, targets);
  }

  // Forward and backward of every micro-batch of `step`; gradients stay allocated. Returns the mean loss.
  double accumulate_gradients(std::int64_t step) {
    const std::int64_t accumulate = cfg_.accumulate_grad_batches;
    const double micro_weight = 1.0 / static_cast<double>(accumulate);
    at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(runtime_.device));
    for (std::int64_t m = 0; m < accumulate; ++m) {
      auto [inputs, targets] = batch(step, m);
      snapshot(step, m, memory::Phase::before_forward);
      at::Tensor loss = forward(inputs, targets);
      snapshot(step, m, memory::Phase::after_forward);
      if (!store_.has_grads()) store_.allocate_grads();
      const double scale = Precision::loss_scaling ? scaler_.scale() : 1.0;
      (loss * (micro_weight * scale)).backward();
      loss_sum += loss.detach().to(at::kDouble);
      loss = at::Tensor();
      snapshot(step, m, memory::Phase::after_backward);
    }
    return loss_sum.item<double>() * micro_weight;
  }

  // One optimizer step on the accumulated gradients, then frees them. Returns false when loss scaling
  // found inf/nan gradients and skipped the update.
  bool apply_gradients() {
    at::NoGradGuard no_grad;
    bool finite = true;
    if constexpr (Precision::loss_scaling) {
      const double inv_scale = 1.0 / scaler_.scale();
      for (std::size_t u = 0; u < store_.num_units(); ++u) {
        const at::Tensor& g = store_.flat_grad(u);
        g.mul_(inv_scale);
        finite = finite && at::isfinite(g).all().template item<bool>();
      }
      finite = scaler_.update(finite);
    }
    if (finite) {
      if (opt_state_.empty()) {  // state appears at the first step, as in torch.optim
        for (std::size_t u = 0; u < store_.num_units(); ++u)
          opt_state_.push_back(Optimizer::init(store_.flat_param(u), Precision::optim_state_dtype));
      }
      const StepHyper hyper{lr(), weight_decay()};
      for (std::size_t u = 0; u < store_.num_units(); ++u)
        Optimizer::step(opt_state_[u], store_.flat_param(u), store_.flat_grad(u), hyper);
    }
    store_.release_grads();
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
    if (!cfg_.save_dir.empty() && runtime_.rank == 0) save_hf_dir<Model>(cfg_.save_dir, model_, store_);
    const auto stats = memory::allocator_stats(runtime_.device);
    nlohmann::json extra = {{"steps", total_steps_},
                            {"tokens_per_s", static_cast<double>(tokens_per_step() * total_steps_) / train_s}};
    if constexpr (Precision::loss_scaling) {
      extra["skipped_steps"] = scaler_.skipped_steps();
      extra["scale_growths"] = scaler_.growths();
      extra["loss_scale"] = scaler_.scale();
    }
    reporter_.done(train_s, stats.peak, extra);
    char line[160];
    std::snprintf(line, sizeof line, "done: %lld steps in %.2f s | %.1f tok/s | peak %s GiB",
                  static_cast<long long>(total_steps_), train_s, extra["tokens_per_s"].template get<double>(),
                  memory::gib(stats.peak).c_str());
    reporter_.print(line);
    summary.train_s = train_s;
    summary.peak_bytes = stats.peak;
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
                     std::to_string(store_.numel()) + " parameters)");
    row("sharding", std::string(Exp::sharding::name));
    row("precision", std::string(Precision::name));
    row("checkpointing", std::string(Checkpointing::name));
    row("optimizer", std::string(Optimizer::name) + " (weight_decay " + std::to_string(weight_decay()) + ")");
    row("device", runtime_.device.str() + ", " + std::to_string(runtime_.threads) + " CPU threads, world size " +
                      std::to_string(runtime_.world_size));
    row("data", std::string(tokens_.description()));
    row("steps", std::to_string(total_steps_) + " (" + std::to_string(order_.steps_per_epoch()) + " per epoch, " +
                     std::to_string(tokens_per_step()) + " tokens per step)");
    return s;
  }

 private:
  std::vector<at::Tensor> compute_copies(at::TensorList params) const {
    std::vector<at::Tensor> out;
    out.reserve(params.size());
    for (const auto& p : params)
      out.push_back(p.scalar_type() == Precision::compute_dtype ? p : p.to(Precision::compute_dtype));
    return out;
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

  void snapshot(std::int64_t step, std::int64_t micro, memory::Phase phase) {
    if (!snapshot_due(step)) return;
    const memory::OwnedBytes owned{store_.param_bytes(), store_.grad_bytes(), optimizer_bytes(), 0};
    const auto snap = memory::make_snapshot(step, micro, phase, runtime_.rank, owned,
                                            memory::allocator_stats(runtime_.device));
    const bool print_line = micro == 0 || phase == memory::Phase::after_optimizer_step;
    reporter_.memory(snap, print_line);
    snapshots_.push_back(snap);
  }

  RunConfig cfg_;
  Runtime runtime_;
  ModelConfig model_;
  data::TokenSource tokens_;
  data::BatchOrder order_;
  std::int64_t total_steps_;
  ParamStore store_;
  typename Model::Context context_;
  Reporter reporter_;
  std::vector<BlockFn> block_fns_;
  std::vector<typename Optimizer::State> opt_state_;
  LossScaler scaler_;
  std::vector<memory::MemorySnapshot> snapshots_;
};

}  // namespace tessera
