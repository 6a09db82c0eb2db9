#pragma once
// defines: ShardPlan, UnitComms, UnitCall and UnitEngine, the part of the engine that every sharding policy
// shares: where each unit's parameters, gradients and the optimizer's slice of them live, when they are
// gathered, freed and reduced. One compiled class for all policies; the policy only picks a ShardPlan.
//
// The forward pass is the model family's list of calls (for a decoder: embedding, each block, the head), each
// on the parameters of one or more units (the head also uses the embedding when the two are tied) and on a list
// of input tensors (a decoder block: the hidden states; a cross-attending block: its own states and the encoder's).
// Every call that has something to differentiate goes through one autograd node, so the engine sees the start
// and end of each call's forward and backward, and returns a gradient for each input that requires one:
//   forward   acquire the call's units (stage 3: all-gather in the compute dtype, prefetching the next call's
//             units; below stage 3 with a compute dtype other than the stored one: a cast of the stored buffer
//             into a buffer of its own; otherwise the stored buffer), run the call with a graph (or without one,
//             saving only its input, when it is checkpointed), release the units (a gathered or cast buffer's
//             storage is freed; the graph keeps views of it and the backward refills them: gathers or casts again).
//   backward  acquire again (prefetching the previous call's units), recompute if checkpointed, back-propagate
//             through the call, write the parameter gradients into the units' full gradient buffers (the first
//             call of a step copies, later calls and micro-steps add; a bucket is allocated when its first
//             unit's gradients arrive, not before). When a
//             unit's last call has run its backward its gradients are complete, and then:
//               stage 0/1 (NoShard, Ddp, Zero1): on the last micro-step, the unit's bucket is all-reduced
//                          (averaged) as soon as all its units are complete; gradients are views of buckets;
//               stage 2/3 (ShardGradOp, FullShard, HybridShard): on every micro-step the full gradients are
//                          reduce-scattered (averaged) over the shard group, added to the rank's gradient shard
//                          (or, streamed, handed to the sink: CPU offload) and freed; HybridShard then averages
//                          the shards across groups on the last micro-step.
// The optimizer then updates update_slice(u) with grad_slice(u): the whole unit (stage 0) or this rank's
// shard (stages 1-3); sync_params() all-gathers the updated shards for stages 1 and 2. A grad-ready callback
// (CPU offload) hears of each unit as soon as its grad_slice is final, while backward still runs.
// The store may live on another device than the computation (OffloadParams: CPU shards, gathered to the
// device); gathered buffers, gradients and the anchor live on plan.device.
// Frozen units (and units with no parameters) have no gradients, no bucket and no update; a call whose units
// are all frozen and whose inputs need no gradient runs without a graph and without the node.
// Stages 2/3 and auto-wrap: a unit that is not `wrapped` belongs to the root unit, as the modules that FSDP's
// auto_wrap_policy leaves to the root do. Stage 3 gathers the root's units together at the first call that needs
// one of them and keeps them until the forward's last call has run its backward (FSDP keeps the root unsharded
// between forward and backward); its units' gradients are reduce-scattered together once all of them are complete.
// With every unit wrapped (the default) there is no root: each unit is gathered and reduced on its own.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "tessera/dist/any_communicator.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera {

struct ShardPlan {
  int stage = 0;                                 // sharding_stage<Policy>: 0 .. 3
  std::int64_t bucket_bytes = 25ll << 20;        // stages 0/1: gradient bucket size
  c10::ScalarType compute_dtype = c10::ScalarType::Float;
  // The dtype gradients are communicated in; Undefined: their own (the store's dtype, as torch DDP), with no copy,
  // or with reduce_in_compute under stages 2/3 the compute dtype (FSDP's MixedPrecision: the unit's full gradients
  // in bf16 under Bf16Mixed, added into the fp32 shard); either way 16-bit on the CPU becomes fp32, which
  // MpiCommunicator adds them in anyway. Another dtype than the gradients' costs a copy of each bucket (at most two
  // in flight) or holds each unit's full gradients in it.
  c10::ScalarType reduce_dtype = c10::ScalarType::Undefined;
  bool reduce_in_compute = false;

  bool prefetch = true;                          // stage 3: start the next call's all-gather early
  c10::Device device = c10::Device(c10::DeviceType::CPU);  // where the computation runs
};

// world: all ranks (bucket all-reduce, stages 0/1); shard: the G ranks a unit is cut across (stages 1-3);
// replica: the ranks holding the same shard in the other groups (HybridShard; a group of one otherwise).
struct UnitComms {
  dist::AnyCommunicator world, shard, replica;
};

struct UnitCall {
  std::vector<std::size_t> units;  // units whose parameters the call uses, its own unit first
  bool checkpointed = false;       // recompute in backward instead of keeping the graph
};

class UnitEngine final : public models::CallRunner {
 public:
  // params[k]: the call's k-th unit's parameters (compute dtype, spec shapes). inputs: what the program passed.
  using CallFn = std::function<at::Tensor(std::size_t call, std::span<const at::Tensor> inputs,
                                          const std::vector<std::vector<at::Tensor>>& params)>;

  // frozen[u]: unit u is never trained (empty: none is). wrapped[u]: unit u is an FSDP unit of its own, else
  // part of the root (empty: every unit is wrapped; only stages 2/3 read it).
  UnitEngine(ParamStore& store, ShardPlan plan, UnitComms comms, std::vector<UnitCall> calls, CallFn fn,
             std::vector<bool> frozen = {}, std::vector<bool> wrapped = {});
  UnitEngine(const UnitEngine&) = delete;
  UnitEngine& operator=(const UnitEngine&) = delete;

  // Runs call `c` (through its autograd node when it has anything to differentiate). Calls of one forward come
  // in the family's order, each once.
  at::Tensor call(std::size_t c, std::vector<at::Tensor> inputs) override;
  // Whether unit u gets gradients and updates (not frozen, not empty).
  bool trainable(std::size_t u) const { return trainable_[u]; }
  // The dtype of every gradient buffer the optimizer reads (grad_slice).
  c10::ScalarType grad_dtype() const { return grad_dtype_; }
  // The dtype gradients are communicated in, and (stages 0/1) the most the copies into it hold at once: the two
  // largest buckets in that dtype, or 0 when it is the gradients' own.
  c10::ScalarType reduce_dtype() const { return reduce_dtype_; }
  std::int64_t reduce_copy_bytes() const;

  // Before each micro-step's forward: marks whether this is the last micro-step of the optimizer step
  // (stages 0/1 and HybridShard reduce only then). Gradients are allocated at the first backward.
  void begin_micro(bool last_micro);
  // After the last micro-step's backward: waits for every reduction; gradients are then final.
  void finish_gradients();
  bool has_grads() const { return has_grads_; }
  void release_grads();
  // Frees unit u's gradient before release_grads (optimizer_in_backward: its update has used it), and under stages
  // 0/1 its bucket once every unit of the bucket is freed. finish_gradients leaves a freed unit alone.
  void release_grad(std::size_t unit);
  // Called once per unit and optimizer step, on the last micro-step, as soon as grad_slice(unit) is final
  // (during backward where the policy allows it, else in finish_gradients).
  using GradReady = std::function<void(std::size_t unit)>;
  void on_grad_ready(GradReady fn) { grad_ready_ = std::move(fn); }
  // Stages 2/3 when no replica groups average the shards after backward (can_stream_grads): every micro-step's
  // reduced gradient of a unit (this rank's shard of it) goes to `sink` and is freed, instead of being added into a
  // gradient shard kept on plan.device for the whole step; `first`: the step's first for the unit (the sink copies
  // it; later ones it adds). grad_slice() then stays undefined and the sink's owner holds the step's sum: CPU
  // offload's host buffers, as DeepSpeed's ZeRO-2/3 offload accumulates its gradient partitions in host memory.
  using GradSink = std::function<void(std::size_t unit, const at::Tensor& reduced, bool first)>;
  bool can_stream_grads() const { return plan_.stage >= 2 && comms_.replica.size() == 1; }
  void stream_grads(GradSink sink);

  // What the optimizer updates and with which gradients (see the header comment).
  at::Tensor update_slice(std::size_t unit) const;
  const at::Tensor& grad_slice(std::size_t unit) const { return grad_slices_[unit]; }
  // Stages 1/2: all-gather every unit's updated shard into the full buffers.
  void sync_params();
  // Every unit's full parameters, for saving: the stored buffers, or (stage 3, collective) gathered copies.
  std::vector<at::Tensor> full_params();

  std::int64_t grad_bytes() const;      // gradient buffers alive now (buckets or shards, plus full unit grads)
  std::int64_t gathered_bytes() const;  // compute copies alive now: stage 3's gathered units, or the casts below it
  std::size_t num_buckets() const { return buckets_.size(); }
  // Stages 2/3: the units of the root (those not wrapped), in unit order; empty when every unit is wrapped.
  const std::vector<std::size_t>& root_units() const { return root_; }
  const UnitComms& comms() const { return comms_; }
  const ShardPlan& plan() const { return plan_; }

  // For the autograd node (unit_engine.cpp): the two halves of a call. backward_call returns one gradient per
  // input (undefined where the input needs none).
  at::Tensor forward_call(std::size_t c, at::TensorList inputs);
  std::vector<at::Tensor> backward_call(std::size_t c, const at::Tensor& grad_out);

 private:
  struct Gathered {              // a unit's full compute-dtype copy: stage 3's gather, or the cast below stage 3
    at::Tensor full;             // (N,); storage freed while not in use
    at::Tensor send;             // the shard cast to the compute dtype, while a gather is in flight
    dist::AnyWork work;
    bool in_flight = false;
    bool materialized = false;
    int refs = 0;
  };
  struct CallState {
    std::vector<at::Tensor> inputs;  // detached; the ones that need a gradient are leaves requiring grad
    at::Tensor out;
    std::vector<std::vector<at::Tensor>> leaves;
    bool active = false;
  };
  struct Bucket {
    at::Tensor flat;             // gradients of its units, param dtype
    at::Tensor wire;             // reduce-dtype copy while in flight (when the dtypes differ)
    std::vector<std::size_t> units;
    std::size_t complete = 0;
    dist::AnyWork work;
  };
  struct Scatter {               // stage 2/3: a reduce-scatter in flight
    std::size_t unit;
    at::Tensor full, out;
    dist::AnyWork work;
  };

  void allocate_bucket(Bucket& b);
  void write_grads(std::size_t unit, std::span<const at::Tensor> grads);
  std::vector<std::vector<at::Tensor>> call_params(std::size_t c, const std::vector<at::Tensor>& fulls) const;
  at::Tensor acquire(std::size_t unit);
  void release(std::size_t unit);
  void start_gather(std::size_t unit);
  void prefetch_call(std::size_t c);
  void unit_complete(std::size_t unit);
  void drain_scatters(std::size_t keep);
  void land_bucket(Bucket& b);
  void hold_root(std::size_t c);
  void drop_root();
  void root_unit_complete();
  void flush_root();
  void add_to_shard(std::size_t unit, at::Tensor reduced);
  void grad_ready(std::size_t unit) {
    if (grad_ready_) grad_ready_(unit);
  }

  ParamStore& store_;
  ShardPlan plan_;
  UnitComms comms_;
  std::vector<UnitCall> calls_;
  CallFn fn_;
  GradReady grad_ready_;
  GradSink sink_;          // stream_grads: where each micro-step's reduced gradients go
  std::vector<bool> sunk_;  // per unit: the sink has had this step's first gradient
  at::Tensor anchor_;  // a leaf every node takes as input, so that each call's output requires grad

  std::vector<Gathered> gathered_;
  std::vector<CallState> states_;
  std::vector<bool> trainable_;
  std::vector<bool> call_trains_;  // per call: it reads a trainable unit
  c10::ScalarType grad_dtype_;
  c10::ScalarType reduce_dtype_;  // plan_.reduce_dtype, or grad_dtype_ where the plan leaves it Undefined
  std::vector<int> uses_;       // calls using each unit
  std::vector<int> uses_left_;  // of those, still to run their backward this micro-step
  int open_calls_ = 0;          // calls whose forward ran through the node and whose backward has not

  // The root (stages 2/3): its units, which units are in it, whether stage 3 holds it gathered, and how many of
  // its trainable units are still to complete their backward this micro-step.
  std::vector<std::size_t> root_;
  std::vector<bool> in_root_;
  bool root_held_ = false;
  std::size_t root_left_ = 0;
  std::size_t root_trainable_ = 0;
  bool last_micro_ = true;
  bool has_grads_ = false;

  // Gradients (trainable units only). Stages 0/1: buckets; full_grads_[u] is a view of u's bucket,
  // grad_slices_[u] of that; written_[u]: u's view holds this step's gradients (else it is uninitialized).
  // Stages 2/3: full_grads_[u] exists from u's first backward call of a micro-step until its reduce-scatter;
  // grad_slices_[u] is the persistent shard, from the first reduce-scatter of the step.
  std::vector<bool> written_;
  std::vector<bool> released_;  // release_grad(u) ran this step
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::deque<std::size_t> wires_;  // buckets whose reduce-dtype copy is in flight, oldest first (at most two)
  std::vector<at::Tensor> full_grads_;
  std::vector<at::Tensor> grad_slices_;
  std::deque<Scatter> scatters_;
};

}  // namespace tessera
