#pragma once
// defines: the policy axes and the `Policy` concept.
// A policy is a small tag type that names the axis it belongs to (`using axis = axis::precision;`)
// and carries that axis's constexpr knobs and behaviour. Experiment<> sorts policies by axis,
// so the order in which a user lists them never matters.
#include <concepts>

namespace tessera {
namespace axis {
struct sharding {};       // who holds which parameters, gradients and optimizer state
struct precision {};      // storage and compute dtypes, loss scaling
struct checkpointing {};  // which blocks recompute their activations in backward
struct optimizer {};      // the update rule and its state
struct offload {};        // what lives in CPU memory instead of on the device (optimizer state, parameters)
struct adapter {};        // trainable low-rank adapters on a frozen (optionally quantized) base
}  // namespace axis

template <class P>
concept Policy = requires { typename P::axis; };

template <class P, class Axis>
concept PolicyOf = Policy<P> && std::same_as<typename P::axis, Axis>;

}  // namespace tessera
