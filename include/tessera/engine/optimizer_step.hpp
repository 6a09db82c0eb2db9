#pragma once
// defines: OptimizerStep<Optimizer, Precision, Offload>, the update half of a training step: loss-scale
// bookkeeping (fp16), the optimizer's state (created at the first step, as torch.optim does), and under
// OffloadOptimizer/OffloadParams the host side (fp32 masters, gradient copies made during backward, the fused
// CPU step and the copy back). It updates every trainable unit's update_slice with its grad_slice: all at once in
// apply(), or (in_backward, once arm()ed for a step) each unit as soon as the engine says its gradient is final,
// freeing that gradient then, with apply() updating whatever backward did not reach.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/engine/cpu_offload.hpp"
#include "tessera/engine/loss_scaler.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/train_state.hpp"
#include "tessera/engine/unit_engine.hpp"
#include "tessera/optim/concept.hpp"

namespace tessera {

// 1 when any rank's flag is set, else 0 (every rank gets it). Collective over the engine's world.
bool any_rank(const UnitEngine& engine, bool flag);

template <class Optimizer, class Precision, class Offload>
class OptimizerStep {
 public:
  static constexpr bool offloads = Offload::offloads_optimizer;
  // Updates during backward need every unit's update to be independent of the others' gradients: not under fp16
  // loss scaling (one inf anywhere skips the whole step) nor offload (its own overlap with backward).
  static constexpr bool can_step_in_backward = !offloads && !Precision::loss_scaling;

  OptimizerStep(UnitEngine& engine, ParamStore& store, bool in_backward = false) : engine_(engine), store_(store) {
    if (in_backward) {
      if constexpr (can_step_in_backward) {
        engine_.on_grad_ready([this](std::size_t u) {
          if (!armed_) return;
          at::NoGradGuard no_grad;
          step_unit(slot_[u], *armed_);
          stepped_[slot_[u]] = true;
          engine_.release_grad(u);
        });
      }
    }
    if constexpr (offloads) {
      std::vector<at::Tensor> slices;
      for (std::size_t u : trainable_units()) slices.push_back(engine_.update_slice(u));
      offload_.emplace(slices, Offload::offloads_parameters, engine_.grad_dtype(), engine_.plan().device);
      if (engine_.can_stream_grads()) {  // ZeRO-2/3: each micro-step's shard into the host sum, none kept on the device
        engine_.stream_grads(
            [this](std::size_t u, const at::Tensor& g, bool first) { offload_->accumulate(slot_[u], g, first); });
        engine_.on_grad_ready([this](std::size_t u) { offload_->grad_final(slot_[u]); });
      } else {
        engine_.on_grad_ready([this](std::size_t u) { offload_->grad_ready(slot_[u], engine_.grad_slice(u)); });
      }
    }
  }
  OptimizerStep(const OptimizerStep&) = delete;
  OptimizerStep& operator=(const OptimizerStep&) = delete;

  // The loss multiplier for backward: the loss scale under fp16, else 1.
  double loss_scale() const { return Precision::loss_scaling ? scaler_.scale() : 1.0; }
  const LossScaler& scaler() const { return scaler_; }
  const CpuOffload* offload() const { return offload_ ? &*offload_ : nullptr; }
  std::int64_t state_bytes() const {
    std::int64_t n = 0;
    for (const auto& s : state_) n += Optimizer::state_bytes(s);
    return n;
  }

  // Training-state checkpoints (engine/train_state.hpp): the fp32 masters under OffloadOptimizer, the optimizer's
  // state (once the first step made it) and, in the manifest, its step count and the loss scaler. Each unit's
  // tensors are cut at its update slice's place in the unit (ParamStore::shard_offset).
  void save_state(TrainStateWriter& out, nlohmann::json& manifest) {
    static_assert(CheckpointableOptimizer<Optimizer>, "checked by the trainer before it saves");
    const std::vector<std::size_t>& units = trainable_units();
    for (std::size_t i = 0; i < units.size(); ++i) {
      const std::size_t u = units[i];
      const std::string unit = std::to_string(u) + ".";
      if constexpr (offloads && !Offload::offloads_parameters)
        out.add_part(unit + "master", offload_->master(i), store_.shard_offset(u), store_.unit_numel(u));
      if (!state_.empty())
        for (const StateTensor& t : Optimizer::state_tensors(state_[i])) {
          if (t.per_element) out.add_part(unit + std::string(t.name), t.tensor, store_.shard_offset(u), store_.unit_numel(u));
          else out.add_local(unit + std::string(t.name), t.tensor);
        }
    }
    nlohmann::json optimizer = {{"name", Optimizer::name}, {"has_state", !state_.empty()}, {"steps", 0}};
    if constexpr (requires(typename Optimizer::State st) { st.steps; })
      if (!state_.empty()) optimizer["steps"] = state_.front().steps;
    manifest["optimizer"] = optimizer;
    manifest["loss_scaler"] = {{"scale", scaler_.scale()},
                               {"good_in_a_row", scaler_.good_in_a_row()},
                               {"skipped", scaler_.skipped_steps()},
                               {"growths", scaler_.growths()}};
  }
  void load_state(const TrainStateReader& in) {
    static_assert(CheckpointableOptimizer<Optimizer>, "checked by the trainer before it resumes");
    at::NoGradGuard no_grad;
    const std::vector<std::size_t>& units = trainable_units();
    const nlohmann::json& m = in.manifest();
    const bool has_state = m.at("optimizer").at("has_state").template get<bool>();
    if (has_state && state_.empty())
      for (std::size_t u : units) state_.push_back(init_state(u));
    for (std::size_t i = 0; i < units.size(); ++i) {
      const std::size_t u = units[i];
      const std::string unit = std::to_string(u) + ".";
      if constexpr (offloads && !Offload::offloads_parameters)
        in.read_part(unit + "master", offload_->master(i), store_.shard_offset(u), store_.unit_numel(u));
      if (has_state)
        for (const StateTensor& t : Optimizer::state_tensors(state_[i])) {
          if (!t.tensor.defined()) continue;
          if (t.per_element) in.read_part(unit + std::string(t.name), t.tensor, store_.shard_offset(u), store_.unit_numel(u));
          else in.read_local(unit + std::string(t.name), t.tensor, store_.layout().group_rank);
        }
      if constexpr (requires(typename Optimizer::State st) { st.steps; })
        if (has_state) state_[i].steps = m.at("optimizer").at("steps").template get<std::int64_t>();
    }
    const nlohmann::json& ls = m.at("loss_scaler");
    scaler_.restore(ls.at("scale").template get<double>(), ls.at("good_in_a_row").template get<std::int64_t>(),
                    ls.at("skipped").template get<std::int64_t>(), ls.at("growths").template get<std::int64_t>());
  }
  // Whether the optimizer's state follows the shard layout (resuming needs the same shard group size).
  static bool has_local_state() {
    if constexpr (CheckpointableOptimizer<Optimizer>) {
      typename Optimizer::State probe{};
      for (const StateTensor& t : Optimizer::state_tensors(probe))
        if (!t.per_element) return true;
    }
    return false;
  }

  // in_backward: the coming backward (the step's last micro-step) updates each unit with `hyper` as its gradient
  // becomes final. The optimizer's state appears now, at the first step, as in torch.optim.
  void arm(const StepHyper& hyper) {
    if constexpr (can_step_in_backward) {
      const std::vector<std::size_t>& units = trainable_units();
      if (state_.empty())
        for (std::size_t u : units) state_.push_back(init_state(u));
      stepped_.assign(units.size(), false);
      armed_ = hyper;
    }
  }

  // One update on the gradients the engine holds (the units backward did not update, once armed). Returns false
  // when loss scaling found inf/nan gradients (on any rank) and skipped it. Collective when loss scaling or
  // sharding are.
  bool apply(const StepHyper& hyper) {
    at::NoGradGuard no_grad;
    if constexpr (offloads) offload_->wait_grads();
    const std::vector<std::size_t>& units = trainable_units();
    if constexpr (Precision::loss_scaling) {
      const double inv_scale = 1.0 / scaler_.scale();
      bool local_finite = true;
      for (std::size_t u : units) {
        const at::Tensor g = step_grad(u);
        g.mul_(inv_scale);
        if (!g.is_meta()) local_finite = local_finite && at::isfinite(g).all().template item<bool>();
      }
      if (!scaler_.update(!any_rank(engine_, !local_finite))) return false;
    }
    if (state_.empty())  // state appears at the first step, as in torch.optim
      for (std::size_t u : units) state_.push_back(init_state(u));
    for (std::size_t i = 0; i < units.size(); ++i)
      if (!armed_ || !stepped_[i]) step_unit(i, hyper);
    armed_.reset();
    if constexpr (offloads) offload_->finish_push();
    engine_.sync_params();
    return true;
  }

 private:
  const std::vector<std::size_t>& trainable_units() {
    if (units_.empty()) {
      slot_.assign(store_.num_units(), 0);
      for (std::size_t u = 0; u < store_.num_units(); ++u)
        if (engine_.trainable(u)) {
          slot_[u] = units_.size();
          units_.push_back(u);
        }
    }
    return units_;
  }

  // The update of the i-th trainable unit.
  void step_unit(std::size_t i, const StepHyper& hyper) {
    const std::size_t u = units_[i];
    at::Tensor slice = engine_.update_slice(u);
    if constexpr (offloads) {
      bool filled = false;
      if constexpr (CpuFusedOptimizer<Optimizer>)
        filled = Optimizer::cpu_step(state_[i], offload_->master(i), offload_->grad(i), hyper, offload_->staging(i));
      else
        Optimizer::step(state_[i], offload_->master(i), offload_->grad(i), hyper);
      offload_->push(i, slice, filled);
    } else {
      Optimizer::step(state_[i], slice, engine_.grad_slice(u), hyper);
    }
  }

  // Optimizer state for unit u's update slice: on the CPU master under offload (always fp32 there).
  typename Optimizer::State init_state(std::size_t u) {
    const at::Tensor slice = offloads ? offload_->master(slot_[u]) : engine_.update_slice(u);
    const c10::ScalarType dtype = offloads ? c10::ScalarType::Float : Precision::optim_state_dtype;
    if constexpr (SegmentAwareOptimizer<Optimizer>) {
      const std::vector<ParamSegment> segments = store_.shard_segments(u);
      return Optimizer::init(slice, dtype, std::span<const ParamSegment>(segments));
    } else {
      return Optimizer::init(slice, dtype);
    }
  }

  // The gradient the update reads: the host copy under offload, else the device slice.
  at::Tensor step_grad(std::size_t u) {
    if constexpr (offloads) return offload_->grad(slot_[u]);
    else return engine_.grad_slice(u);
  }

  UnitEngine& engine_;
  ParamStore& store_;
  std::vector<std::size_t> units_;  // the trainable units, in order
  std::vector<std::size_t> slot_;   // per unit: its index in units_ (the offload's and the state's numbering)
  std::optional<CpuOffload> offload_;
  std::vector<typename Optimizer::State> state_;
  std::optional<StepHyper> armed_;  // in_backward: the hyperparameters of the step whose backward updates
  std::vector<bool> stepped_;       // per trainable unit: updated in that backward
  LossScaler scaler_;
};

}  // namespace tessera
