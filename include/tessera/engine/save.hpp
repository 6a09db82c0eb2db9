#pragma once
// defines: save_hf_dir, writing trained weights as a Hugging Face model directory
// (config.json + model.safetensors, or shards + index) from one full buffer per unit. The directory appears whole or not at all:
// it is written under a temporary name and renamed at the end.
#include <filesystem>
#include <span>
#include <string>
#include <unistd.h>

#include "tessera/core/error.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/tensor_bytes.hpp"

namespace tessera {

// Moves a fully written temporary directory into place (removing it on failure).
void commit_dir(const std::filesystem::path& tmp, const std::filesystem::path& dir);

template <class Model>
void save_hf_dir(const std::filesystem::path& dir, const typename Model::Config& config, const ParamStore& store,
                 std::span<const at::Tensor> full_units) {
  std::filesystem::path tmp = dir;
  tmp += ".partial-" + std::to_string(::getpid());
  std::filesystem::remove_all(tmp);
  try {
    std::filesystem::create_directories(tmp);
    Model::write_config(tmp / "config.json", config, torch_dtype_name(store.dtype()));
    store.save(tmp, full_units);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(tmp, ignored);
    throw;
  }
  commit_dir(tmp, dir);
}

}  // namespace tessera
