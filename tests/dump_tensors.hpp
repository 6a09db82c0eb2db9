#pragma once
// defines: tessera::testing::write_named_tensors, the last step of the dump tools (tests/quant/nf4_dump.cpp,
// tests/optim/adam8bit_dump.cpp) that hand tessera's tensors to the Python reference checks: (name, tensor) pairs
// written, each made contiguous, to one safetensors file.
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/io/safetensors.hpp"

namespace tessera::testing {

inline void write_named_tensors(const std::string& path, std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::vector<io::TensorView> views;
  for (auto& [name, t] : tensors) {
    t = t.contiguous();  // the views point into t: it must outlive write_safetensors
    views.push_back(tensor_view(name, t));
  }
  io::write_safetensors(path, views);
}

}  // namespace tessera::testing
