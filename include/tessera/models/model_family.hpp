#pragma once
// defines: ModelFamily, what Experiment<> requires of its first argument, and check_family<M>, which says
// member by member what a type lacks. A family owns its shapes, its parameters, its unit layout and its forward
// program; the engine owns where tensors live. A family M provides (see models/llama.hpp for a whole one):
//   using family = tessera::models::model_family_tag;
//   name                                   "llama", printed in the experiment table
//   lora_targets (optional)                PEFT's default target_modules, what lora_targets=auto adapts
//   Config                                 one instance = one shape; .initializer_range, .parameter_count()
//   preset(name) -> Config, preset_names() the named shapes that `model=` accepts
//   read_config(path) / write_config(path, config, torch_dtype)   Hugging Face config.json in and out
//   parameters(config) -> vector<ParamSpec>   every tensor, HF names, each tagged with its unit
//   units(config) -> vector<UnitInfo>         per unit: module path, block type, frozen
//   calls(config) -> vector<CallInfo>         the calls of the forward program, in order
//   Batch, data_spec(config)                  what one micro-batch is (TokenBatch: token ids; ImageBatch: images)
//                                             and what its data needs of the model (TokenSpec, ImageSpec)
//   Context, make_context(config, seq_len, compute_dtype, device)   tables built once per run (rotary, ...)
//   compute(config, ctx, call, CallWeights, inputs) -> Tensor       what one call computes
//   forward(config, CallRunner&, batch) -> Tensor                   the program: calls in order, the loss
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tessera/core/param_spec.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera::models {

struct model_family_tag {};

namespace family_traits {
template <class M>
concept tagged = requires { typename M::family; } && std::same_as<typename M::family, model_family_tag>;
template <class M>
concept named = requires {
  typename M::Config;
  { M::name } -> std::convertible_to<std::string_view>;
};
template <class M>
concept has_shapes = named<M> && requires(const typename M::Config& c, std::string_view s, const std::filesystem::path& p) {
  { M::preset(s) } -> std::same_as<typename M::Config>;
  { M::preset_names() } -> std::convertible_to<std::span<const std::string_view>>;
  { M::read_config(p) } -> std::same_as<typename M::Config>;
  M::write_config(p, c, s);
  { c.initializer_range } -> std::convertible_to<double>;
  { c.parameter_count() } -> std::convertible_to<std::int64_t>;
};
template <class M>
concept has_layout = named<M> && requires(const typename M::Config& c) {
  { M::parameters(c) } -> std::same_as<std::vector<ParamSpec>>;
  { M::units(c) } -> std::same_as<std::vector<UnitInfo>>;
  { M::calls(c) } -> std::same_as<std::vector<CallInfo>>;
};
template <class M>
concept has_program = named<M> && requires(const typename M::Config& c, CallRunner& run, std::int64_t n,
                                           c10::ScalarType t, c10::Device d, std::size_t call, const CallWeights& w,
                                           std::span<const at::Tensor> inputs) {
  typename M::Batch;
  typename M::Context;
  M::data_spec(c);
  { M::make_context(c, n, t, d) } -> std::same_as<typename M::Context>;
  { M::compute(c, std::declval<const typename M::Context&>(), call, w, inputs) } -> std::same_as<at::Tensor>;
  { M::forward(c, run, std::declval<const typename M::Batch&>()) } -> std::same_as<at::Tensor>;
};
}  // namespace family_traits

template <class M>
concept ModelFamily = family_traits::tagged<M> && family_traits::has_shapes<M> && family_traits::has_layout<M> &&
                      family_traits::has_program<M>;

// What lora_targets=auto means for M: its lora_targets, or empty when it names none.
template <class M>
constexpr std::string_view default_lora_targets() {
  if constexpr (requires { M::lora_targets; }) return M::lora_targets;
  else return {};
}

// One assert per missing part, so that the compiler names what to add (used by Experiment<>).
template <class M>
constexpr bool check_family() {
  static_assert(family_traits::tagged<M>,
                "tessera::Experiment: the first argument must be a model family such as tessera::models::Llama "
                "(a type with `using family = tessera::models::model_family_tag;`), followed by policies.");
  if constexpr (family_traits::tagged<M>) {
    static_assert(family_traits::named<M>, "tessera model family: add `using Config = ...;` (one shape) and "
                                           "`static constexpr std::string_view name = \"...\";`.");
    static_assert(family_traits::has_shapes<M>,
                  "tessera model family: add preset(name) -> Config, preset_names() -> span<const string_view>, "
                  "read_config(path) -> Config, write_config(path, config, torch_dtype), and give Config the "
                  "members initializer_range and parameter_count() (see models/model_family.hpp).");
    static_assert(family_traits::has_layout<M>,
                  "tessera model family: add parameters(config) -> vector<ParamSpec>, units(config) -> "
                  "vector<UnitInfo> and calls(config) -> vector<CallInfo> (see models/model_family.hpp).");
    static_assert(family_traits::has_program<M>,
                  "tessera model family: add `using Batch = ...;` (e.g. TokenBatch), `struct Context`, "
                  "data_spec(config) (e.g. TokenSpec), make_context(config, seq_len, dtype, device), compute(config, ctx, call, "
                  "CallWeights, inputs) -> Tensor and forward(config, CallRunner&, batch) -> Tensor (see "
                  "models/model_family.hpp).");
  }
  return ModelFamily<M>;
}

}  // namespace tessera::models
