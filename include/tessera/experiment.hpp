#pragma once
// defines: tessera::Experiment<Model, Policies...>, the one type that names a whole training setup.
//
//   using Exp = tessera::Experiment<tessera::models::Llama, tessera::Bf16Mixed, tessera::CheckpointEveryBlock>;
//
// Policies may come in any order and any axis may be left out (defaults: NoShard, Fp32, NoCheckpoint,
// AdamW). Experiment<> is an alias of the normalised ExperimentSpec<Model, Sharding, Precision,
// Checkpointing, Optimizer>, so two lists that differ only in order name the same type.
#include <cstddef>
#include <type_traits>

#include "tessera/checkpoint/concept.hpp"
#include "tessera/checkpoint/no_checkpoint.hpp"
#include "tessera/core/axis.hpp"
#include "tessera/models/model_family.hpp"
#include "tessera/optim/adamw.hpp"
#include "tessera/optim/concept.hpp"
#include "tessera/precision/concept.hpp"
#include "tessera/precision/fp32.hpp"
#include "tessera/sharding/concept.hpp"
#include "tessera/sharding/no_shard.hpp"

namespace tessera {

template <class Model, class Sharding, class Precision, class Checkpointing, class Optimizer>
struct ExperimentSpec {
  using model = Model;
  using sharding = Sharding;
  using precision = Precision;
  using checkpointing = Checkpointing;
  using optimizer = Optimizer;
};

namespace detail {

template <class P>
constexpr bool is_known_axis =
    PolicyOf<P, axis::sharding> || PolicyOf<P, axis::precision> || PolicyOf<P, axis::checkpointing> ||
    PolicyOf<P, axis::optimizer>;

// One instantiation per listed type, so the compiler's note names the offending type.
template <class P>
struct check_policy : std::true_type {
  static_assert(!models::ModelFamily<P>,
                "tessera::Experiment: a model family may only be the FIRST argument "
                "(write Experiment<models::Llama, Policies...>).");
  static_assert(models::ModelFamily<P> || Policy<P>,
                "tessera::Experiment: this argument is not a tessera policy (it has no `using axis = ...;`). "
                "Pass policies such as NoShard, Fp32, Bf16Mixed, CheckpointEveryBlock, AdamW, Sgd, or give your own "
                "policy type a `using axis = tessera::axis::<axis>;` member.");
  static_assert(models::ModelFamily<P> || !Policy<P> || is_known_axis<P>,
                "tessera::Experiment: this policy's axis is not one of tessera::axis::{sharding, precision, "
                "checkpointing, optimizer}.");
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

template <class Model, class... Ps>
struct resolve {
  static_assert(models::ModelFamily<Model>,
                "tessera::Experiment: the first argument must be a model family such as tessera::models::Llama "
                "(a type with `using family = tessera::models::model_family_tag;`), followed by policies.");
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
  using optimizer = typename pick<axis::optimizer, AdamW, Ps...>::type;

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

  using type = ExperimentSpec<Model, sharding, precision, checkpointing, optimizer>;
};

}  // namespace detail

template <class Model, class... Policies>
using Experiment = typename detail::resolve<Model, Policies...>::type;

}  // namespace tessera
