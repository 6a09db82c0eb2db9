#pragma once
// defines: OffloadPolicy, what the engine asks an offload policy.
//   name                 label printed in the config table
//   offloads_optimizer   fp32 master parameters and optimizer state live in (pinned) CPU memory; gradients are
//                        copied to the CPU as backward produces them and the optimizer steps there (ZeRO-Offload)
//   offloads_parameters  the parameter shards themselves live in CPU memory and are gathered to the device per
//                        unit (ZeRO-Infinity style parameter offload); needs a policy that shards parameters
// offloads_parameters implies offloads_optimizer: the CPU shard is the master copy the optimizer updates.
#include <concepts>
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {

template <class P>
concept OffloadPolicy = PolicyOf<P, axis::offload> && requires {
  { P::name } -> std::convertible_to<std::string_view>;
  { P::offloads_optimizer } -> std::convertible_to<bool>;
  { P::offloads_parameters } -> std::convertible_to<bool>;
};

}  // namespace tessera
