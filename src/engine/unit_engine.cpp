// implements: UnitEngine (engine/unit_engine.hpp) and the autograd node every call goes through.
#include "tessera/engine/unit_engine.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "tessera/core/error.hpp"
#include "tessera/engine/storage.hpp"
#include "tessera/engine/target.hpp"
#include "tessera/report/timeline.hpp"

namespace tessera {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The unit a call's timeline events are named by: its own (first) unit; -1 for a call without parameters.
std::int64_t own_unit(const UnitCall& call) {
  return call.units.empty() ? -1 : static_cast<std::int64_t>(call.units.front());
}

// One call of the forward. Its inputs are the call's input tensors, the engine's anchor leaf (so the output
// requires grad even when no input does, as for the embedding's token ids) and, as integers, the engine and the
// call index. Everything else happens in UnitEngine.
struct UnitNode : torch::autograd::Function<UnitNode> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList inputs, const at::Tensor& anchor,
                            std::int64_t engine, std::int64_t call) {
    (void)anchor;
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["call"] = call;
    return reinterpret_cast<UnitEngine*>(engine)->forward_call(static_cast<std::size_t>(call), inputs);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* engine = reinterpret_cast<UnitEngine*>(ctx->saved_data["engine"].toInt());
    const auto call = static_cast<std::size_t>(ctx->saved_data["call"].toInt());
    variable_list grads = engine->backward_call(call, grad_outputs[0]);
    grads.resize(grads.size() + 3);  // anchor, engine, call
    return grads;
  }
};

// The same memory as `t` behind a new tensor with its own version counter. Gathers write through it: the
// autograd graph saved views of the gathered buffer at version v, and refilling the buffer with the same
// values for backward must not look like an in-place change to autograd.
// (A meta tensor has no pointer to wrap: the alias takes its storage instead.)
at::Tensor write_alias(const at::Tensor& t) {
  if (t.is_meta()) return at::empty({0}, t.options()).set_(t.storage(), t.storage_offset(), t.sizes(), t.strides());
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options());
}

std::int64_t element_bytes(c10::ScalarType t) { return static_cast<std::int64_t>(c10::elementSize(t)); }

}  // namespace

UnitEngine::UnitEngine(ParamStore& store, ShardPlan plan, UnitComms comms, std::vector<UnitCall> calls, CallFn fn,
                       std::vector<bool> frozen, std::vector<bool> wrapped)
    : store_(store), plan_(plan), comms_(std::move(comms)), calls_(std::move(calls)), fn_(std::move(fn)) {
  const std::size_t units = store_.num_units();
  if (plan_.stage < 0 || plan_.stage > 3) throw Error("UnitEngine: sharding stage " + std::to_string(plan_.stage));
  const bool sharded_layout = plan_.stage >= 1;
  if (sharded_layout && store_.layout().group_size != comms_.shard.size())
    throw Error("UnitEngine: the parameter layout is cut for " + std::to_string(store_.layout().group_size) +
                " ranks but the shard group has " + std::to_string(comms_.shard.size()));
  if ((plan_.stage == 3) != store_.layout().store_shards)
    throw Error("UnitEngine: stage 3 needs a store of shards, other stages a store of full units");
  const auto device = plan_.device;
  anchor_ = at::empty({0}, at::TensorOptions().dtype(at::kFloat).device(device)).requires_grad_(true);

  uses_.assign(units, 0);
  std::vector<std::size_t> first_call(units, calls_.size());
  for (std::size_t c = 0; c < calls_.size(); ++c)
    for (std::size_t u : calls_[c].units) {
      if (u >= units) throw Error("UnitEngine: call " + std::to_string(c) + " uses unit " + std::to_string(u));
      ++uses_[u];
      first_call[u] = std::min(first_call[u], c);
    }
  for (std::size_t u = 0; u < units; ++u)
    if (!uses_[u]) throw Error("UnitEngine: no call uses unit " + std::to_string(u));
  if (!frozen.empty() && frozen.size() != units)
    throw Error("UnitEngine: " + std::to_string(frozen.size()) + " frozen flags for " + std::to_string(units) + " units");
  trainable_.assign(units, false);
  for (std::size_t u = 0; u < units; ++u) trainable_[u] = store_.unit_numel(u) > 0 && (frozen.empty() || !frozen[u]);
  if (!wrapped.empty() && wrapped.size() != units)
    throw Error("UnitEngine: " + std::to_string(wrapped.size()) + " wrap flags for " + std::to_string(units) + " units");
  in_root_.assign(units, false);
  if (plan_.stage >= 2 && !wrapped.empty())
    for (std::size_t u = 0; u < units; ++u)
      if (!wrapped[u]) {
        in_root_[u] = true;
        root_.push_back(u);
        if (trainable_[u]) ++root_trainable_;
      }
  root_left_ = root_trainable_;
  call_trains_.assign(calls_.size(), false);
  for (std::size_t c = 0; c < calls_.size(); ++c)
    for (std::size_t u : calls_[c].units) call_trains_[c] = call_trains_[c] || trainable_[u];
  // Gradients in the stored dtype, except under parameter offload, where the CPU store is fp32 master: then in
  // the compute dtype (what a device store would have been).
  grad_dtype_ = store_.device() != plan_.device ? plan_.compute_dtype : store_.dtype();
  // reduce_dtype=param/auto (Undefined): the gradients' own dtype, or (auto, stages 2/3) the compute dtype, as
  // FSDP's MixedPrecision reduces; 16-bit on the CPU is fp32, which MpiCommunicator adds in anyway (MPI has no
  // 16-bit float type): there the buffers are fp32 from the start, where a 16-bit one would be staged into an fp32
  // copy by every collective.
  if (plan_.reduce_dtype != c10::ScalarType::Undefined) {
    reduce_dtype_ = plan_.reduce_dtype;
  } else {
    reduce_dtype_ = plan_.reduce_in_compute && plan_.stage >= 2 ? plan_.compute_dtype : grad_dtype_;
    const bool lowp = reduce_dtype_ == at::kBFloat16 || reduce_dtype_ == at::kHalf;
    if (lowp && kernel_target(anchor_) == c10::DeviceType::CPU) reduce_dtype_ = c10::ScalarType::Float;
  }
  uses_left_ = uses_;
  states_.resize(calls_.size());
  full_grads_.resize(units);
  grad_slices_.resize(units);
  written_.assign(units, false);
  released_.assign(units, false);
  sunk_.assign(units, false);

  // Mixed precision below stage 3 (the store holds the fp32 masters on the device): each unit's compute copy is
  // cast into a buffer of its own when a call needs it and freed when no call holds it, after the unit's forward
  // and again after its backward, as FullShard frees a gathered unit. The autograd graph's saved views keep the
  // storage object, which acquire() refills from the unchanged master before the unit's backward, so the copies
  // live a unit at a time instead of all of them from forward to backward (one more cast per unit in backward).
  // gathered_ is non-empty under stage 3 and under this recast, empty otherwise.
  const bool recast = plan_.stage < 3 && store_.dtype() != plan_.compute_dtype && store_.device() == plan_.device;
  if (plan_.stage == 3 || recast) {
    gathered_.resize(units);
    for (std::size_t u = 0; u < units; ++u) {
      const std::int64_t numel = plan_.stage == 3 ? store_.padded_numel(u) : store_.flat_param(u).numel();
      gathered_[u].full = at::empty({numel}, at::TensorOptions().dtype(plan_.compute_dtype).device(device));
      storage::free_storage(gathered_[u].full);
    }
  }
  if (plan_.stage <= 1) {
    // Buckets in the order units complete in backward: the unit whose first call comes last completes first.
    std::vector<std::size_t> order(units);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return first_call[a] > first_call[b]; });
    bucket_of_.assign(units, 0);
    std::int64_t bytes = 0;
    // As PyTorch DDP: the first bucket is capped at 1 MiB so that communication starts early in backward.
    const std::int64_t first_cap = std::min<std::int64_t>(plan_.bucket_bytes, 1 << 20);
    for (std::size_t u : order) {
      if (!trainable_[u]) continue;
      if (buckets_.empty() || bytes >= (buckets_.size() == 1 ? first_cap : plan_.bucket_bytes)) {
        buckets_.emplace_back();
        bytes = 0;
      }
      buckets_.back().units.push_back(u);
      bucket_of_[u] = buckets_.size() - 1;
      bytes += store_.padded_numel(u) * element_bytes(store_.dtype());
    }
  }
}

at::Tensor UnitEngine::call(std::size_t c, std::vector<at::Tensor> inputs) {
  if (c >= calls_.size())
    throw Error("UnitEngine: the program ran call " + std::to_string(c) + " but the family declares " +
                std::to_string(calls_.size()) + " calls");
  bool differentiable = call_trains_[c];
  for (const auto& x : inputs) differentiable = differentiable || (x.defined() && x.requires_grad());
  if (differentiable && at::GradMode::is_enabled())
    return UnitNode::apply(at::TensorList(inputs), anchor_, reinterpret_cast<std::int64_t>(this),
                           static_cast<std::int64_t>(c));
  // Nothing to differentiate (a frozen call on inputs that need no gradient, or no grad mode): no graph.
  const bool grad_mode = at::GradMode::is_enabled();
  at::NoGradGuard no_graph;
  hold_root(c);
  std::vector<at::Tensor> fulls;
  for (std::size_t u : calls_[c].units) fulls.push_back(acquire(u));
  prefetch_call(c + 1);
  at::Tensor out = fn_(c, inputs, call_params(c, fulls));
  fulls.clear();
  for (std::size_t u : calls_[c].units) release(u);
  if (!grad_mode && open_calls_ == 0) drop_root();  // no backward will come to end the root's hold
  return out;
}

std::vector<std::vector<at::Tensor>> UnitEngine::call_params(std::size_t c, const std::vector<at::Tensor>& fulls) const {
  std::vector<std::vector<at::Tensor>> params;
  for (std::size_t k = 0; k < calls_[c].units.size(); ++k) params.push_back(store_.unit_views(calls_[c].units[k], fulls[k]));
  return params;
}

// ---------------------------------------------------------------- parameters

void UnitEngine::start_gather(std::size_t u) {
  Gathered& g = gathered_[u];
  storage::restore_storage(g.full, static_cast<std::size_t>(g.full.numel() * element_bytes(plan_.compute_dtype)));
  const at::Tensor& shard = store_.flat_param(u);
  {
    // OffloadParams: the shard comes from host memory (traced as a copy; on one device, a cast).
    std::optional<timeline::Scope> copy;
    if (shard.device() != plan_.device)
      copy.emplace(timeline::Kind::h2d, static_cast<std::int64_t>(u),
                   shard.numel() * static_cast<std::int64_t>(element_bytes(plan_.compute_dtype)));
    g.send = shard.to(plan_.device, plan_.compute_dtype, /*non_blocking=*/true);
  }
  g.work = comms_.shard.all_gather_async(g.send, write_alias(g.full));
  g.in_flight = true;
}

at::Tensor UnitEngine::acquire(std::size_t u) {
  if (gathered_.empty()) {  // below stage 3, no recast: the parameters themselves, or a cast per call
    const at::Tensor& flat = store_.flat_param(u);
    return flat.scalar_type() == plan_.compute_dtype ? flat : flat.to(plan_.compute_dtype);
  }
  Gathered& g = gathered_[u];
  if (!g.materialized) {
    if (plan_.stage < 3) {  // the recast compute copy (constructor): cast again from the master
      storage::restore_storage(g.full, static_cast<std::size_t>(g.full.numel() * element_bytes(plan_.compute_dtype)));
      write_alias(g.full).copy_(store_.flat_param(u));
    } else {
      if (!g.in_flight) start_gather(u);
      g.work.wait();
      g.work = dist::AnyWork();
      g.send = at::Tensor();
      g.in_flight = false;
    }
    g.materialized = true;
  }
  ++g.refs;
  return g.full;
}

void UnitEngine::release(std::size_t u) {
  if (gathered_.empty()) return;
  Gathered& g = gathered_[u];
  if (--g.refs == 0 && g.materialized) {
    storage::free_storage(g.full);
    g.materialized = false;
  }
}

void UnitEngine::hold_root(std::size_t c) {
  if (plan_.stage < 3 || root_held_ || root_.empty()) return;
  if (std::none_of(calls_[c].units.begin(), calls_[c].units.end(), [&](std::size_t u) { return in_root_[u]; }))
    return;
  for (std::size_t u : root_)  // all of the root's gathers in flight at once, then wait for each
    if (!gathered_[u].materialized && !gathered_[u].in_flight) start_gather(u);
  for (std::size_t u : root_) acquire(u);
  root_held_ = true;
}

void UnitEngine::drop_root() {
  if (!root_held_) return;
  for (std::size_t u : root_) release(u);
  root_held_ = false;
}

void UnitEngine::prefetch_call(std::size_t c) {
  if (plan_.stage < 3 || !plan_.prefetch || c >= calls_.size()) return;
  for (std::size_t u : calls_[c].units)
    if (!gathered_[u].materialized && !gathered_[u].in_flight) start_gather(u);
}

// ---------------------------------------------------------------- forward and backward of one call

at::Tensor UnitEngine::forward_call(std::size_t c, at::TensorList inputs) {
  const UnitCall& spec = calls_[c];
  CallState& st = states_[c];
  if (st.active) throw Error("UnitEngine: call " + std::to_string(c) + " ran forward twice before its backward");
  hold_root(c);
  std::vector<at::Tensor> fulls;
  for (std::size_t u : spec.units) fulls.push_back(acquire(u));
  prefetch_call(c + 1);
  st.inputs.clear();
  for (const at::Tensor& x : inputs) {
    at::Tensor leaf = x.defined() ? x.detach() : x;
    if (x.defined() && x.requires_grad()) leaf.requires_grad_(true);
    st.inputs.push_back(std::move(leaf));
  }
  at::Tensor out;
  const timeline::Scope timed(timeline::Kind::forward, own_unit(spec));
  if (spec.checkpointed) {
    at::NoGradGuard no_graph;
    out = fn_(c, st.inputs, call_params(c, fulls));
  } else {
    at::AutoGradMode graph(true);
    st.leaves = call_params(c, fulls);
    for (std::size_t k = 0; k < spec.units.size(); ++k)
      if (trainable_[spec.units[k]])
        for (auto& p : st.leaves[k]) p = p.detach().requires_grad_(true);
    out = fn_(c, st.inputs, st.leaves);
    st.out = out;
  }
  fulls.clear();
  for (std::size_t u : spec.units) release(u);
  st.active = true;
  ++open_calls_;
  return out.detach();
}

std::vector<at::Tensor> UnitEngine::backward_call(std::size_t c, const at::Tensor& grad_out) {
  const UnitCall& spec = calls_[c];
  CallState& st = states_[c];
  if (!st.active) throw Error("UnitEngine: backward of call " + std::to_string(c) + " without its forward");
  has_grads_ = true;
  // MPI moves nonblocking collectives forward only inside MPI calls: poll the buckets in flight.
  for (Bucket& b : buckets_)
    if (!b.work.empty()) b.work.is_completed();
  std::vector<at::Tensor> fulls;
  for (std::size_t u : spec.units) fulls.push_back(acquire(u));
  if (c > 0) prefetch_call(c - 1);

  std::optional<timeline::Scope> timed(std::in_place, timeline::Kind::backward, own_unit(spec));
  at::Tensor out = st.out;
  std::vector<std::vector<at::Tensor>> leaves = std::move(st.leaves);
  if (spec.checkpointed) {
    at::AutoGradMode graph(true);
    leaves = call_params(c, fulls);
    for (std::size_t k = 0; k < spec.units.size(); ++k)
      if (trainable_[spec.units[k]])
        for (auto& p : leaves[k]) p = p.detach().requires_grad_(true);
    out = fn_(c, st.inputs, leaves);
  }
  // Differentiate with respect to the inputs that need a gradient, then the trainable units' parameters.
  variable_list wrt;
  for (const auto& x : st.inputs)
    if (x.defined() && x.requires_grad()) wrt.push_back(x);
  for (std::size_t k = 0; k < spec.units.size(); ++k)
    if (trainable_[spec.units[k]]) wrt.insert(wrt.end(), leaves[k].begin(), leaves[k].end());
  variable_list grads = wrt.empty() || !out.requires_grad()
                            ? variable_list(wrt.size())
                            : torch::autograd::grad({out}, wrt, {grad_out}, /*retain_graph=*/false,
                                                    /*create_graph=*/false, /*allow_unused=*/true);
  std::vector<at::Tensor> input_grads;
  std::size_t next = 0;
  for (const auto& x : st.inputs)
    input_grads.push_back(x.defined() && x.requires_grad() ? grads[next++] : at::Tensor());
  {
    at::NoGradGuard no_grad;
    for (std::size_t k = 0; k < spec.units.size(); ++k) {
      const std::size_t u = spec.units[k];
      if (!trainable_[u]) continue;
      const std::size_t n = leaves[k].size();
      write_grads(u, std::span<const at::Tensor>(grads).subspan(next, n));
      next += n;
    }
  }
  timed.reset();
  st = CallState{};
  out = at::Tensor();
  leaves.clear();
  grads.clear();
  fulls.clear();
  for (std::size_t u : spec.units) release(u);
  for (std::size_t u : spec.units)
    if (trainable_[u] && --uses_left_[u] == 0) in_root_[u] ? root_unit_complete() : unit_complete(u);
  // The micro-step's backward is over: its last reduce-scatters land now (stages 2/3), as FSDP waits for them
  // before the next forward, instead of one unit's full gradient and shard staying in flight through that forward.
  if (--open_calls_ == 0) {
    drop_root();
    drain_scatters(0);
  }
  return input_grads;
}

// Unit u's parameter gradients from one call into its full gradient buffer: copied on the first write (the
// buffer is uninitialized then; a parameter the call did not reach gets zeros), added afterwards.
void UnitEngine::write_grads(std::size_t u, std::span<const at::Tensor> grads) {
  if (plan_.stage <= 1) {
    Bucket& b = buckets_[bucket_of_[u]];
    if (!b.flat.defined()) allocate_bucket(b);
  } else if (!full_grads_[u].defined()) {
    full_grads_[u] = at::empty({store_.padded_numel(u)}, at::TensorOptions().dtype(reduce_dtype_).device(plan_.device));
    written_[u] = false;
  }
  const bool first = !written_[u];
  written_[u] = true;
  const at::Tensor& full = full_grads_[u];
  if (first && store_.padded_numel(u) > store_.unit_numel(u))  // the padding, which no view covers
    full.narrow(0, store_.unit_numel(u), store_.padded_numel(u) - store_.unit_numel(u)).zero_();
  const std::vector<at::Tensor> views = store_.unit_views(u, full);
  for (std::size_t k = 0; k < views.size(); ++k) {
    const at::Tensor& g = grads[k];
    if (first)
      g.defined() ? views[k].copy_(g) : views[k].zero_();
    else if (g.defined())
      views[k].add_(g);
  }
}

// ---------------------------------------------------------------- gradients

void UnitEngine::begin_micro(bool last_micro) {
  flush_root();
  last_micro_ = last_micro;
  uses_left_ = uses_;
}

void UnitEngine::allocate_bucket(Bucket& b) {
  std::int64_t total = 0;
  for (std::size_t u : b.units) total += store_.padded_numel(u);
  b.flat = at::empty({total}, at::TensorOptions().dtype(grad_dtype_).device(plan_.device));
  std::int64_t offset = 0;
  for (std::size_t u : b.units) {
    full_grads_[u] = b.flat.narrow(0, offset, store_.padded_numel(u));
    offset += store_.padded_numel(u);
    const std::int64_t s = store_.shard_numel(u);
    grad_slices_[u] = plan_.stage == 0 ? full_grads_[u] : full_grads_[u].narrow(0, store_.layout().group_rank * s, s);
    written_[u] = false;
  }
}

void UnitEngine::unit_complete(std::size_t u) {
  if (plan_.stage <= 1) {
    if (!last_micro_) return;
    if (comms_.world.size() == 1) {
      grad_ready(u);
      return;
    }
    Bucket& b = buckets_[bucket_of_[u]];
    if (++b.complete < b.units.size()) return;
    if (b.flat.scalar_type() != reduce_dtype_) b.wire = b.flat.to(reduce_dtype_);
    const at::Tensor& wire = b.wire.defined() ? b.wire : b.flat;
    // The last bucket completes with backward itself: nothing is left to overlap it with, so it runs as a
    // blocking all-reduce (MPI's blocking algorithms beat its nonblocking ones on large buffers).
    if (&b == &buckets_.back()) {
      comms_.world.all_reduce(wire, dist::ReduceOp::avg);
      land_bucket(b);
    } else {
      b.work = comms_.world.all_reduce_async(wire, dist::ReduceOp::avg);
    }
    // A copy in another dtype (reduce_dtype=fp32 under bf16 gradients) lives only while its bucket is reduced:
    // at most two are in flight, so the copies cost two buckets, not a copy of every gradient.
    if (b.wire.defined()) {
      wires_.push_back(bucket_of_[u]);
      while (wires_.size() > 2) {
        land_bucket(buckets_[wires_.front()]);
        wires_.pop_front();
      }
    }
    return;
  }
  at::Tensor full = std::move(full_grads_[u]);
  full_grads_[u] = at::Tensor();
  if (comms_.shard.size() == 1) {
    add_to_shard(u, std::move(full));
    if (last_micro_ && comms_.replica.size() == 1) grad_ready(u);
    return;
  }
  at::Tensor out = at::empty({store_.shard_numel(u)}, full.options());
  dist::AnyWork work = comms_.shard.reduce_scatter_async(full, out, dist::ReduceOp::avg);
  scatters_.push_back(Scatter{u, std::move(full), std::move(out), std::move(work)});
  // One reduce-scatter in flight at a time: the previous unit's full gradients are freed now, so at most
  // two units' full gradients ever exist.
  drain_scatters(1);
}

// A bucket's all-reduce done: its reduce-dtype copy (if any) back into the bucket, and freed.
void UnitEngine::land_bucket(Bucket& b) {
  b.work.wait();
  b.work = dist::AnyWork();
  if (!b.wire.defined()) return;
  b.flat.copy_(b.wire);
  b.wire = at::Tensor();
}

// A root unit's gradients wait for the rest of the root's: then all of them are reduced, as one FSDP unit's are.
void UnitEngine::root_unit_complete() {
  if (--root_left_ == 0) flush_root();
}

// Reduces the root units that hold gradients of this micro-step (all of them, or at the end of a micro-step the
// ones the loss reached) and starts the count again.
void UnitEngine::flush_root() {
  for (std::size_t u : root_)
    if (trainable_[u] && full_grads_[u].defined()) unit_complete(u);
  root_left_ = root_trainable_;
}

// Stages 2/3: the step's gradient shard is the first micro-step's reduced shard itself (no zero-fill, no
// copy when the dtypes agree), later micro-steps add to it.
void UnitEngine::add_to_shard(std::size_t u, at::Tensor reduced) {
  if (sink_) {
    sink_(u, reduced, !sunk_[u]);
    sunk_[u] = true;
    return;
  }
  if (grad_slices_[u].defined())
    grad_slices_[u].add_(reduced);
  else
    grad_slices_[u] = reduced.scalar_type() == grad_dtype_ ? std::move(reduced) : reduced.to(grad_dtype_);
}

void UnitEngine::drain_scatters(std::size_t keep) {
  while (scatters_.size() > keep) {
    Scatter& s = scatters_.front();
    s.work.wait();
    add_to_shard(s.unit, std::move(s.out));
    const std::size_t unit = s.unit;
    scatters_.pop_front();
    if (last_micro_ && comms_.replica.size() == 1) grad_ready(unit);
  }
}

void UnitEngine::finish_gradients() {
  at::NoGradGuard no_grad;
  if (plan_.stage <= 1) {
    for (Bucket& b : buckets_) {
      if (std::all_of(b.units.begin(), b.units.end(), [&](std::size_t u) { return released_[u]; })) {
        b.complete = 0;  // every unit's update ran in backward, and the bucket is freed
        continue;
      }
      if (!b.flat.defined()) allocate_bucket(b);
      for (std::size_t u : b.units)  // a unit the loss did not reach this step: zeros, as torch's reached ones
        if (!written_[u]) {
          full_grads_[u].zero_();
          written_[u] = true;
        }
      if (comms_.world.size() > 1) {
        if (b.complete != b.units.size())
          throw Error("UnitEngine: a gradient bucket was not complete at the end of backward");
        land_bucket(b);
        for (std::size_t u : b.units) grad_ready(u);
      }
      b.complete = 0;
    }
    wires_.clear();
    return;
  }
  flush_root();
  drain_scatters(0);
  // A trainable unit the loss did not reach this step: a zero gradient, as torch gives a parameter it reached.
  for (std::size_t u = 0; u < store_.num_units(); ++u) {
    if (!trainable_[u] || released_[u] || (sink_ ? sunk_[u] : grad_slices_[u].defined())) continue;
    add_to_shard(u, at::zeros({store_.shard_numel(u)}, at::TensorOptions().dtype(grad_dtype_).device(plan_.device)));
    if (comms_.replica.size() == 1) grad_ready(u);
  }
  if (comms_.replica.size() > 1) {
    std::vector<at::Tensor> shards;
    for (std::size_t u = 0; u < store_.num_units(); ++u)
      if (trainable_[u]) shards.push_back(grad_slices_[u]);
    comms_.replica.all_reduce(std::span<const at::Tensor>(shards), dist::ReduceOp::avg);
    for (std::size_t u = 0; u < store_.num_units(); ++u)
      if (trainable_[u]) grad_ready(u);
  }
}

void UnitEngine::release_grads() {
  for (Bucket& b : buckets_) b.flat = at::Tensor();
  for (auto& g : full_grads_) g = at::Tensor();
  for (auto& g : grad_slices_) g = at::Tensor();
  written_.assign(written_.size(), false);
  released_.assign(released_.size(), false);
  sunk_.assign(sunk_.size(), false);
  has_grads_ = false;
}

void UnitEngine::stream_grads(GradSink sink) {
  if (!can_stream_grads())
    throw Error("UnitEngine: gradients stream only under stages 2/3 without replica groups (stage " +
                std::to_string(plan_.stage) + ", " + std::to_string(comms_.replica.size()) + " replica group(s))");
  sink_ = std::move(sink);
}

void UnitEngine::release_grad(std::size_t u) {
  released_[u] = true;
  grad_slices_[u] = at::Tensor();
  if (plan_.stage > 1) return;
  full_grads_[u] = at::Tensor();
  Bucket& b = buckets_[bucket_of_[u]];
  if (std::all_of(b.units.begin(), b.units.end(), [&](std::size_t v) { return released_[v]; })) b.flat = at::Tensor();
}

// ---------------------------------------------------------------- optimizer side

at::Tensor UnitEngine::update_slice(std::size_t u) const {
  return plan_.stage == 0 || plan_.stage == 3 ? store_.flat_param(u) : store_.shard(u);
}

void UnitEngine::sync_params() {
  if (plan_.stage != 1 && plan_.stage != 2) return;
  if (comms_.shard.size() == 1) return;
  std::vector<dist::AnyWork> works;
  for (std::size_t u = 0; u < store_.num_units(); ++u)
    works.push_back(comms_.shard.all_gather_async(store_.shard(u), store_.flat_param(u)));
  for (auto& w : works) w.wait();
}

std::vector<at::Tensor> UnitEngine::full_params() {
  std::vector<at::Tensor> out;
  for (std::size_t u = 0; u < store_.num_units(); ++u) {
    if (plan_.stage < 3) {
      out.push_back(store_.flat_param(u));
    } else {
      // Gathered on the compute device (OffloadParams' CPU shards travel there first).
      const at::Tensor shard = store_.flat_param(u).to(plan_.device);
      at::Tensor full = at::empty({store_.padded_numel(u)}, shard.options());
      comms_.shard.all_gather(shard, full);
      out.push_back(std::move(full));
    }
  }
  return out;
}

std::int64_t UnitEngine::grad_bytes() const {
  std::int64_t n = 0;
  for (const Bucket& b : buckets_) {
    if (b.flat.defined()) n += static_cast<std::int64_t>(b.flat.nbytes());
    if (b.wire.defined()) n += static_cast<std::int64_t>(b.wire.nbytes());
  }
  if (plan_.stage >= 2) {
    for (const auto& g : grad_slices_)
      if (g.defined()) n += static_cast<std::int64_t>(g.nbytes());
    for (const auto& g : full_grads_)
      if (g.defined()) n += static_cast<std::int64_t>(g.nbytes());
    for (const auto& s : scatters_) n += static_cast<std::int64_t>(s.full.nbytes() + s.out.nbytes());
  }
  return n;
}

std::int64_t UnitEngine::reduce_copy_bytes() const {
  if (plan_.stage > 1 || reduce_dtype_ == grad_dtype_) return 0;
  std::vector<std::int64_t> numel;
  for (const Bucket& b : buckets_) {
    std::int64_t n = 0;
    for (std::size_t u : b.units) n += store_.padded_numel(u);
    numel.push_back(n);
  }
  std::sort(numel.begin(), numel.end(), std::greater<>());
  std::int64_t n = 0;
  for (std::size_t k = 0; k < std::min<std::size_t>(2, numel.size()); ++k) n += numel[k];
  return n * static_cast<std::int64_t>(element_bytes(reduce_dtype_));
}

std::int64_t UnitEngine::gathered_bytes() const {
  std::int64_t n = 0;
  for (const auto& g : gathered_) n += static_cast<std::int64_t>(g.full.storage().nbytes());
  return n;
}

}  // namespace tessera
