#pragma once
// defines: tessera::Experiment<Model, Policies...>, the one type that names a whole training setup.
//
//   using Exp = tessera::Experiment<tessera::models::Llama, tessera::Bf16Mixed, tessera::CheckpointEveryBlock>;
//
// Policies may come in any order and any axis may be left out (defaults: NoShard, Fp32, NoCheckpoint,
// AdamW, NoOffload, NoAdapter). Experiment<> is an alias of the normalised ExperimentSpec<Model, Sharding,
// Precision, Checkpointing, Optimizer, Offload, Adapter>, so two lists that differ only in order name the same
// type. Combinations the engine does not support fail here, at compile time, with a message saying what to
// change (see the static_asserts in detail::resolve).
#include <cstddef>
#include <type_traits>

#include "tessera/adapter/concept.hpp"
#include "tessera/adapter/no_adapter.hpp"
#include "tessera/checkpoint/concept.hpp"
#include "tessera/checkpoint/no_checkpoint.hpp"
#include "tessera/core/axis.hpp"
#include "tessera/models/model_family.hpp"
#include "tessera/offload/concept.hpp"
#include "tessera/offload/no_offload.hpp"
#include "tessera/optim/adamw.hpp"
#include "tessera/optim/concept.hpp"
#include "tessera/precision/concept.hpp"
#include "tessera/precision/fp32.hpp"
#include "tessera/sharding/concept.hpp"
#include "tessera/sharding/no_shard.hpp"

namespace tessera {

template <class Model, class Sharding, class Precision, class Checkpointing, class Optimizer, class Offload,
          class Adapter>
struct ExperimentSpec {
  using model = Model;
  using sharding = Sharding;
  using precision = Precision;
  using checkpointing = Checkpointing;
  using optimizer = Optimizer;
  using offload = Offload;
  using adapter = Adapter;
};

namespace detail {

template <class P>
constexpr bool is_known_axis =
    PolicyOf<P, axis::sharding> || PolicyOf<P, axis::precision> || PolicyOf<P, axis::checkpointing> ||
    PolicyOf<P, axis::optimizer> || PolicyOf<P, axis::offload> || PolicyOf<P, axis::adapter>;

// One instantiation per listed type, so the compiler's note names the offending type.
template <class P>
struct check_policy : std::true_type {
  static_assert(!models::family_traits::tagged<P>,
                "tessera::Experiment: a model family may only be the FIRST argument "
                "(write Experiment<models::Llama, Policies...>).");
  static_assert(models::family_traits::tagged<P> || Policy<P>,
                "tessera::Experiment: this argument is not a tessera policy (it has no `using axis = ...;`). "
                "Pass policies such as NoShard, Fp32, Bf16Mixed, CheckpointEveryBlock, AdamW, Sgd, OffloadOptimizer, "
                "Lora, or give your own "
                "policy type a `using axis = tessera::axis::<axis>;` member.");
  static_assert(models::family_traits::tagged<P> || !Policy<P> || is_known_axis<P>,
                "tessera::Experiment: this policy's axis is not one of tessera::axis::{sharding, precision, "
                "checkpointing, optimizer, offload, adapter}.");
};

template <class Axis, class... Ps>
constexpr std::size_t count_of = (std::size_t{0} + ... + (PolicyOf<Ps, Axis> ? 1 : 0));

// The first of Ps on Axis, or Default when none is.
template <class Axis, class Default, class... Ps>
struct pick {
  using type = Default;
};
template <class Axis, class Default, class P, class... Rest>
struct pick<Axis, Default, P, Rest...> {
  using type = std::conditional_t<PolicyOf<P, Axis>, P, typename pick<Axis, Default, Rest...>::type>;
};

// Checked only once the policy models ShardingPolicy (the concept's own assert speaks first).
template <class S>
constexpr bool sharding_nests() {
  if constexpr (ShardingPolicy<S>)
    return sharding_levels_nest<S>;
  else
    return true;
}

// Cross-axis rules, checked once each axis' policy models its concept.
template <class S, class O, class A>
constexpr bool combination_ok() {
  if constexpr (ShardingPolicy<S> && OffloadPolicy<O> && AdapterPolicy<A>) {
    static_assert(!O::offloads_parameters || S::shards_parameters,
                  "tessera::Experiment: OffloadParams keeps parameter SHARDS in CPU memory and gathers them per unit, "
                  "so it needs a sharding policy that shards parameters: add tessera::FullShard (or HybridShard), or "
                  "use tessera::OffloadOptimizer to offload only the optimizer.");
    static_assert(!O::offloads_parameters || O::offloads_optimizer,
                  "tessera::Experiment: an offload policy with offloads_parameters must also set "
                  "offloads_optimizer (the CPU shard is the optimizer's master copy).");
    static_assert(!A::trains_adapters || !S::shards_optimizer,
                  "tessera::Experiment: Lora/QLora train small adapters on a frozen, replicated base; sharding them "
                  "(Zero1, ShardGradOp, FullShard, HybridShard) is not supported. Use tessera::NoShard on one rank or "
                  "tessera::Ddp on several.");
    static_assert(!A::trains_adapters || !O::offloads_optimizer,
                  "tessera::Experiment: Lora/QLora keep optimizer state for the adapters only (a few MiB); "
                  "offloading it is not supported. Remove OffloadOptimizer/OffloadParams.");
    static_assert(!A::double_quant || A::quantizes_base,
                  "tessera::Experiment: an adapter policy with double_quant must also set quantizes_base.");
  }
  return true;
}

template <class Model, class... Ps>
struct resolve {
  static_assert(models::check_family<Model>(), "tessera::Experiment: the first argument is not a complete model family "
                                               "(the assertion above names what it lacks).");
  static_assert((check_policy<Ps>::value && ...));
  static_assert(count_of<axis::sharding, Ps...> <= 1,
                "tessera::Experiment: two sharding policies given; keep exactly one.");
  static_assert(count_of<axis::precision, Ps...> <= 1,
                "tessera::Experiment: two precision policies given (e.g. Fp32 and Bf16Mixed); keep exactly one.");
  static_assert(count_of<axis::checkpointing, Ps...> <= 1,
                "tessera::Experiment: two checkpointing policies given (e.g. NoCheckpoint and CheckpointEveryBlock); "
                "keep exactly one.");
  static_assert(count_of<axis::optimizer, Ps...> <= 1,
                "tessera::Experiment: two optimizer policies given (e.g. AdamW and Sgd); keep exactly one.");

  using sharding = typename pick<axis::sharding, NoShard, Ps...>::type;
  using precision = typename pick<axis::precision, Fp32, Ps...>::type;
  using checkpointing = typename pick<axis::checkpointing, NoCheckpoint, Ps...>::type;
  static_assert(count_of<axis::offload, Ps...> <= 1,
                "tessera::Experiment: two offload policies given (e.g. OffloadOptimizer and OffloadParams); keep "
                "exactly one (OffloadParams already offloads the optimizer).");
  static_assert(count_of<axis::adapter, Ps...> <= 1,
                "tessera::Experiment: two adapter policies given (e.g. Lora and QLora); keep exactly one (QLora is "
                "Lora on an NF4-quantized base).");

  using optimizer = typename pick<axis::optimizer, AdamW, Ps...>::type;
  using offload = typename pick<axis::offload, NoOffload, Ps...>::type;
  using adapter = typename pick<axis::adapter, NoAdapter, Ps...>::type;

  static_assert(ShardingPolicy<sharding>,
                "tessera::Experiment: the sharding policy lacks a member ShardingPolicy needs (name, "
                "shards_parameters, shards_gradients, shards_optimizer, data_parallel, hybrid); see "
                "sharding/concept.hpp.");
  static_assert(sharding_nests<sharding>(),
                "tessera::Experiment: the sharding policy's levels do not nest: shards_parameters needs "
                "shards_gradients, which needs shards_optimizer; hybrid needs shards_parameters; sharding anything "
                "needs data_parallel. Set the missing flags (see sharding/concept.hpp).");
  static_assert(PrecisionPolicy<precision>,
                "tessera::Experiment: the precision policy lacks a member PrecisionPolicy needs (name, param_dtype, "
                "compute_dtype, optim_state_dtype, loss_scaling); see precision/concept.hpp.");
  static_assert(CheckpointPolicy<checkpointing>,
                "tessera::Experiment: the checkpointing policy lacks `static bool checkpointed(std::size_t)` (constexpr "
                "where possible) or a name; see checkpoint/concept.hpp.");
  static_assert(OptimizerPolicy<optimizer>,
                "tessera::Experiment: the optimizer policy lacks name/State/init/step/state_bytes/default_weight_decay; "
                "see optim/concept.hpp.");

  static_assert(OffloadPolicy<offload>,
                "tessera::Experiment: the offload policy lacks a member OffloadPolicy needs (name, offloads_optimizer, "
                "offloads_parameters); see offload/concept.hpp.");
  static_assert(AdapterPolicy<adapter>,
                "tessera::Experiment: the adapter policy lacks a member AdapterPolicy needs (name, trains_adapters, "
                "quantizes_base, double_quant); see adapter/concept.hpp.");
  static_assert(combination_ok<sharding, offload, adapter>());

  using type = ExperimentSpec<Model, sharding, precision, checkpointing, optimizer, offload, adapter>;
};

}  // namespace detail

template <class Model, class... Policies>
using Experiment = typename detail::resolve<Model, Policies...>::type;

}  // namespace tessera
