#pragma once
// defines: the image pieces the image data sources share (ImageBatches, CaptionBatches), internal to src/data:
//   mix              splitmix64's finalizer, the hash of the synthetic sets (a row's class, a caption's length)
//   uniform_image    a (C, S, S) fp32 image uniform in [0, 1) from a CPU generator seeded with `seed`
//   normalize        (x - mean) / std per channel, with the image processor's mean and std
//   synthetic_image  row `row` of a synthetic set: half its class's fixed pattern, half its own noise, normalized,
//                    so that the class is learnable from the image; every machine draws the same pixels
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "tessera/models/family_parts.hpp"

namespace tessera::data::detail {

std::uint64_t mix(std::uint64_t x);
at::Tensor uniform_image(const models::ImageSpec& s, std::uint64_t seed);
at::Tensor normalize(at::Tensor x01, const models::ImageSpec& s);
at::Tensor synthetic_image(const models::ImageSpec& s, std::uint64_t seed, std::int64_t cls, std::int64_t row);

}  // namespace tessera::data::detail
