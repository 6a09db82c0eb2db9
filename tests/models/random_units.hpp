#pragma once
// random_units<M>(config): a family's parameters as leaves requiring grad, grouped by unit as DirectRunner takes
// them: matrices and biases N(0, 0.05^2), norm weights 1 + N(0, 0.1^2). For the forward tests of tests/models/.
#include <ATen/ATen.h>

#include <vector>

#include "tessera/core/param_spec.hpp"

namespace tessera::testing {

template <class M>
std::vector<std::vector<at::Tensor>> random_units(const typename M::Config& c) {
  std::vector<std::vector<at::Tensor>> units(M::units(c).size());
  for (const ParamSpec& s : M::parameters(c)) {
    at::Tensor t = at::randn(s.shape) * (s.init == ParamInit::ones ? 0.1 : 0.05);
    if (s.init == ParamInit::ones) t += 1.0;
    units.at(s.unit).push_back(t.requires_grad_(true));
  }
  return units;
}

}  // namespace tessera::testing
