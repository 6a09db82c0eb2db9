// implements: mix, uniform_image, normalize and synthetic_image (data/synthetic_images.hpp).
#include "tessera/data/synthetic_images.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstddef>

namespace tessera::data::detail {

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

at::Tensor uniform_image(const models::ImageSpec& s, std::uint64_t seed) {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::rand({s.channels, s.image_size, s.image_size}, g, at::TensorOptions().dtype(at::kFloat));
}

at::Tensor normalize(at::Tensor x01, const models::ImageSpec& s) {
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  at::Tensor mean = at::empty({s.channels, 1, 1}, opts), stdev = at::empty({s.channels, 1, 1}, opts);
  for (std::int64_t c = 0; c < s.channels; ++c) {
    mean[c] = s.mean[static_cast<std::size_t>(c % 3)];
    stdev[c] = s.std[static_cast<std::size_t>(c % 3)];
  }
  return (x01 - mean) / stdev;
}

at::Tensor synthetic_image(const models::ImageSpec& s, std::uint64_t seed, std::int64_t cls, std::int64_t row) {
  // A class's fixed pattern (half of the range) plus the row's own noise (the other half).
  const at::Tensor pattern = uniform_image(s, mix(seed + 0x5bd1e995ull * static_cast<std::uint64_t>(cls + 1)));
  const at::Tensor noise = uniform_image(s, mix(seed ^ (0x27d4eb2full * static_cast<std::uint64_t>(row + 1))));
  return normalize(pattern * 0.5 + noise * 0.5, s);
}

}  // namespace tessera::data::detail
