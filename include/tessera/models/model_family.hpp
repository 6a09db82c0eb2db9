#pragma once
// defines: ModelFamily, what Experiment<> requires of its first argument.
// A model family is a tag type with `using family = tessera::models::model_family_tag;`, a `Config`
// (one instance = one shape), a parameter list, and the pieces of forward the engine calls unit by unit
// (see models/llama.hpp for the full set).
#include <concepts>
#include <string_view>

namespace tessera::models {

struct model_family_tag {};

template <class M>
concept ModelFamily = std::same_as<typename M::family, model_family_tag> && requires {
  typename M::Config;
  typename M::Context;
  { M::name } -> std::convertible_to<std::string_view>;
};

}  // namespace tessera::models
