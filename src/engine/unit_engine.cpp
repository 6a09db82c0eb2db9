// implements: UnitEngine (engine/unit_engine.hpp) and the autograd node every call goes through.
#include "tessera/engine/unit_engine.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <numeric>

#include "tessera/engine/storage.hpp"
#include "tessera/core/error.hpp"

namespace tessera {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One call of the forward. Its inputs are the call's input x, the auxiliary tensor (targets), the engine's
// anchor leaf (so the output requires grad even when x does not, as for the embedding's token ids) and, as
// integers, the engine and the call index. Everything else happens in UnitEngine.
struct UnitNode : torch::autograd::Function<UnitNode> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& aux, const at::Tensor& anchor,
                            std::int64_t engine, std::int64_t call) {
    (void)anchor;
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["call"] = call;
    return reinterpret_cast<UnitEngine*>(engine)->forward_call(static_cast<std::size_t>(call), x, aux);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* engine = reinterpret_cast<UnitEngine*>(ctx->saved_data["engine"].toInt());
    const auto call = static_cast<std::size_t>(ctx->saved_data["call"].toInt());
    return {engine->backward_call(call, grad_outputs[0]), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The same memory as `t` behind a new tensor with its own version counter. Gathers write through it: the
// autograd graph saved views of the gathered buffer at version v, and refilling the buffer with the same
// values for backward must not look like an in-place change to autograd.
at::Tensor write_alias(const at::Tensor& t) { return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options()); }

std::int64_t element_bytes(c10::ScalarType t) { return static_cast<std::int64_t>(c10::elementSize(t)); }

}  // namespace

UnitEngine::UnitEngine(ParamStore& store, ShardPlan plan, UnitComms comms, std::vector<UnitCall> calls, CallFn fn)
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
  uses_left_ = uses_;
  states_.resize(calls_.size());
  full_grads_.resize(units);
  grad_slices_.resize(units);

  if (plan_.stage == 3) {
    gathered_.resize(units);
    for (std::size_t u = 0; u < units; ++u) {
      gathered_[u].full = at::empty({store_.padded_numel(u)}, at::TensorOptions().dtype(plan_.compute_dtype).device(device));
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

at::Tensor UnitEngine::call(std::size_t c, const at::Tensor& x, const at::Tensor& aux) {
  static const at::Tensor none = at::empty({0}, at::kLong);
  return UnitNode::apply(x, aux.defined() ? aux : none, anchor_, reinterpret_cast<std::int64_t>(this),
                         static_cast<std::int64_t>(c));
}

// ---------------------------------------------------------------- parameters

void UnitEngine::start_gather(std::size_t u) {
  Gathered& g = gathered_[u];
  storage::restore_storage(g.full, static_cast<std::size_t>(g.full.numel() * element_bytes(plan_.compute_dtype)));
  const at::Tensor& shard = store_.flat_param(u);
  g.send = shard.to(plan_.device, plan_.compute_dtype, /*non_blocking=*/true);
  g.work = comms_.shard.all_gather_async(g.send, write_alias(g.full));
  g.in_flight = true;
}

at::Tensor UnitEngine::acquire(std::size_t u) {
  if (plan_.stage < 3) {
    const at::Tensor& flat = store_.flat_param(u);
    return flat.scalar_type() == plan_.compute_dtype ? flat : flat.to(plan_.compute_dtype);
  }
  Gathered& g = gathered_[u];
  if (!g.materialized) {
    if (!g.in_flight) start_gather(u);
    g.work.wait();
    g.work = dist::AnyWork();
    g.send = at::Tensor();
    g.in_flight = false;
    g.materialized = true;
  }
  ++g.refs;
  return g.full;
}

void UnitEngine::release(std::size_t u) {
  if (plan_.stage < 3) return;
  Gathered& g = gathered_[u];
  if (--g.refs == 0 && g.materialized) {
    storage::free_storage(g.full);
    g.materialized = false;
  }
}

void UnitEngine::prefetch_call(std::size_t c) {
  if (plan_.stage < 3 || !plan_.prefetch || c >= calls_.size()) return;
  for (std::size_t u : calls_[c].units)
    if (!gathered_[u].materialized && !gathered_[u].in_flight) start_gather(u);
}

// ---------------------------------------------------------------- forward and backward of one call

at::Tensor UnitEngine::forward_call(std::size_t c, const at::Tensor& x, const at::Tensor& aux) {
  const UnitCall& spec = calls_[c];
  CallState& st = states_[c];
  if (st.active) throw Error("UnitEngine: call " + std::to_string(c) + " ran forward twice before its backward");
  std::vector<std::vector<at::Tensor>> params;
  for (std::size_t u : spec.units) params.push_back(store_.unit_views(u, acquire(u)));
  prefetch_call(c + 1);
  st.x = x.detach();
  if (x.requires_grad()) st.x.requires_grad_(true);
  st.aux = aux;
  at::Tensor out;
  if (spec.checkpointed) {
    at::NoGradGuard no_graph;
    out = fn_(c, st.x, aux, params);
  } else {
    at::AutoGradMode graph(true);
    for (auto& unit : params)
      for (auto& p : unit) p = p.detach().requires_grad_(true);
    st.leaves = std::move(params);
    out = fn_(c, st.x, aux, st.leaves);
    st.out = out;
  }
  for (std::size_t u : spec.units) release(u);
  st.active = true;
  return out.detach();
}

at::Tensor UnitEngine::backward_call(std::size_t c, const at::Tensor& grad_out) {
  const UnitCall& spec = calls_[c];
  CallState& st = states_[c];
  if (!st.active) throw Error("UnitEngine: backward of call " + std::to_string(c) + " without its forward");
  if (!has_grads_) allocate_grads();  // at the first backward, as autograd would: none exist during forward
  // MPI moves nonblocking collectives forward only inside MPI calls: poll the buckets in flight.
  for (Bucket& b : buckets_)
    if (!b.work.empty()) b.work.is_completed();
  std::vector<at::Tensor> fulls;
  for (std::size_t u : spec.units) fulls.push_back(acquire(u));
  if (c > 0) prefetch_call(c - 1);

  at::Tensor out = st.out;
  std::vector<std::vector<at::Tensor>> leaves = std::move(st.leaves);
  if (spec.checkpointed) {
    at::AutoGradMode graph(true);
    leaves.clear();
    for (std::size_t k = 0; k < spec.units.size(); ++k) {
      leaves.push_back(store_.unit_views(spec.units[k], fulls[k]));
      for (auto& p : leaves.back()) p = p.detach().requires_grad_(true);
    }
    out = fn_(c, st.x, st.aux, leaves);
  }
  variable_list inputs;
  const bool x_grad = st.x.requires_grad();
  if (x_grad) inputs.push_back(st.x);
  for (const auto& unit : leaves) inputs.insert(inputs.end(), unit.begin(), unit.end());
  // A call with nothing to differentiate (the embedding under Lora: frozen, and token ids in) has no backward.
  variable_list grads = inputs.empty() || !out.requires_grad()
                            ? variable_list(inputs.size())
                            : torch::autograd::grad({out}, inputs, {grad_out}, /*retain_graph=*/false,
                                                    /*create_graph=*/false, /*allow_unused=*/true);
  at::Tensor grad_x = x_grad ? grads[0] : at::Tensor();
  std::size_t next = x_grad ? 1 : 0;
  {
    at::NoGradGuard no_grad;
    for (std::size_t k = 0; k < spec.units.size(); ++k) {
      const std::size_t u = spec.units[k];
      if (!full_grads_[u].defined())  // stages 2/3: this backward's full gradients of the unit
        full_grads_[u] = at::zeros({store_.padded_numel(u)},
                                   at::TensorOptions().dtype(plan_.reduce_dtype).device(plan_.device));
      const std::vector<at::Tensor> views = store_.unit_views(u, full_grads_[u]);
      for (const auto& view : views) {
        const at::Tensor& g = grads[next++];
        if (g.defined()) view.add_(g);
      }
    }
  }
  st = CallState{};
  out = at::Tensor();
  leaves.clear();
  grads.clear();
  fulls.clear();
  for (std::size_t u : spec.units) release(u);
  for (std::size_t u : spec.units)
    if (--uses_left_[u] == 0) unit_complete(u);
  return grad_x;
}

// ---------------------------------------------------------------- gradients

void UnitEngine::begin_micro(bool last_micro) {
  last_micro_ = last_micro;
  uses_left_ = uses_;
}

void UnitEngine::allocate_grads() {
  // Gradients in the stored dtype, except under parameter offload, where the CPU store is fp32 master: then in
  // the compute dtype (what a device store would have been).
  const bool offloaded = store_.device() != plan_.device;
  const auto options =
      at::TensorOptions().dtype(offloaded ? plan_.compute_dtype : store_.dtype()).device(plan_.device);
  if (plan_.stage <= 1) {
    for (Bucket& b : buckets_) {
      std::int64_t total = 0;
      for (std::size_t u : b.units) total += store_.padded_numel(u);
      b.flat = at::zeros({total}, options);
      std::int64_t offset = 0;
      for (std::size_t u : b.units) {
        full_grads_[u] = b.flat.narrow(0, offset, store_.padded_numel(u));
        offset += store_.padded_numel(u);
        const std::int64_t s = store_.shard_numel(u);
        grad_slices_[u] = plan_.stage == 0 ? full_grads_[u]
                                           : full_grads_[u].narrow(0, store_.layout().group_rank * s, s);
      }
    }
  } else {
    for (std::size_t u = 0; u < store_.num_units(); ++u) grad_slices_[u] = at::zeros({store_.shard_numel(u)}, options);
  }
  has_grads_ = true;
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
    if (b.flat.scalar_type() != plan_.reduce_dtype) b.wire = b.flat.to(plan_.reduce_dtype);
    const at::Tensor& wire = b.wire.defined() ? b.wire : b.flat;
    // The last bucket completes with backward itself: nothing is left to overlap it with, so it runs as a
    // blocking all-reduce (MPI's blocking algorithms beat its nonblocking ones on large buffers).
    if (&b == &buckets_.back())
      comms_.world.all_reduce(wire, dist::ReduceOp::avg);
    else
      b.work = comms_.world.all_reduce_async(wire, dist::ReduceOp::avg);
    return;
  }
  at::Tensor full = std::move(full_grads_[u]);
  full_grads_[u] = at::Tensor();
  if (comms_.shard.size() == 1) {
    grad_slices_[u].add_(full);
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

void UnitEngine::drain_scatters(std::size_t keep) {
  while (scatters_.size() > keep) {
    Scatter& s = scatters_.front();
    s.work.wait();
    grad_slices_[s.unit].add_(s.out);
    const std::size_t unit = s.unit;
    scatters_.pop_front();
    if (last_micro_ && comms_.replica.size() == 1) grad_ready(unit);
  }
}

void UnitEngine::finish_gradients() {
  at::NoGradGuard no_grad;
  if (plan_.stage <= 1) {
    for (Bucket& b : buckets_) {
      if (comms_.world.size() > 1) {
        if (b.complete != b.units.size())
          throw Error("UnitEngine: a gradient bucket was not complete at the end of backward");
        b.work.wait();
        b.work = dist::AnyWork();
        if (b.wire.defined()) b.flat.copy_(b.wire);
        b.wire = at::Tensor();
        for (std::size_t u : b.units) grad_ready(u);
      }
      b.complete = 0;
    }
    return;
  }
  drain_scatters(0);
  if (comms_.replica.size() > 1) {
    std::vector<at::Tensor> shards(grad_slices_.begin(), grad_slices_.end());
    comms_.replica.all_reduce(std::span<const at::Tensor>(shards), dist::ReduceOp::avg);
    for (std::size_t u = 0; u < store_.num_units(); ++u) grad_ready(u);
  }
}

void UnitEngine::release_grads() {
  for (Bucket& b : buckets_) b.flat = at::Tensor();
  for (auto& g : full_grads_) g = at::Tensor();
  for (auto& g : grad_slices_) g = at::Tensor();
  has_grads_ = false;
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
  for (const Bucket& b : buckets_)
    if (b.flat.defined()) n += static_cast<std::int64_t>(b.flat.nbytes());
  if (plan_.stage >= 2) {
    for (const auto& g : grad_slices_)
      if (g.defined()) n += static_cast<std::int64_t>(g.nbytes());
    for (const auto& g : full_grads_)
      if (g.defined()) n += static_cast<std::int64_t>(g.nbytes());
    for (const auto& s : scatters_) n += static_cast<std::int64_t>(s.full.nbytes() + s.out.nbytes());
  }
  return n;
}

std::int64_t UnitEngine::gathered_bytes() const {
  std::int64_t n = 0;
  for (const auto& g : gathered_) n += static_cast<std::int64_t>(g.full.storage().nbytes());
  return n;
}

}  // namespace tessera
