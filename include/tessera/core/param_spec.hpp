#pragma once
// defines: ParamSpec, one trainable tensor as a model family declares it.
// A model lists its parameters in a fixed order, each tagged with the unit it belongs to.
// Units are what the engine manages as one flat buffer, what checkpointing wraps (blocks) and
// what sharding gathers and frees together; the family's units() describes each (models/family_parts.hpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

enum class ParamInit {
  normal,  // N(0, std^2), std = ParamSpec::init_std or else initializer_range: Hugging Face's Linear and Embedding
  ones,    // norm scales
  kaiming_uniform,  // U(-1/sqrt(in), 1/sqrt(in)) for an (out, in) matrix: nn.Linear's default, LoRA's A
  zeros,            // LoRA's B
};

struct ParamSpec {
  std::string name;                 // Hugging Face tensor name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<std::int64_t> shape;  // e.g. (out_features, in_features) for a linear weight
  std::size_t unit = 0;
  ParamInit init = ParamInit::normal;
  bool linear = false;  // the (out, in) weight of a linear layer: adapters may adapt it, QLora quantizes it
  double init_std = 0.0;  // ParamInit::normal: this tensor's own std when > 0 (T5 scales it per layer shape)
  // Other names a checkpoint may store this tensor under, read when `name` is absent: the tied copies older
  // Hugging Face files keep (T5's encoder.embed_tokens.weight for shared.weight). Saving writes `name` only.
  std::vector<std::string> aliases = {};

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

}  // namespace tessera
