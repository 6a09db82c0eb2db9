#pragma once
// defines: save_hf_dir, writing trained weights as a Hugging Face model directory
// (config.json + model.safetensors, or shards + index) from one full buffer per unit. The directory appears
// whole or not at all: it is written beside the target under a temporary name (core/partial_files.hpp) and
// renamed at the end; `dir` may be spelled with a trailing separator ("out/").
#include <filesystem>
#include <span>

#include "tessera/core/partial_files.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/tensor_bytes.hpp"

namespace tessera {

// Writes the directory under its temporary name and returns it uncommitted: the caller moves it into place
// (commit()) once everything else the run must finish has succeeded, or drops it.
template <class Model>
StagedDir stage_hf_dir(const std::filesystem::path& dir, const typename Model::Config& config, const ParamStore& store,
                       std::span<const at::Tensor> full_units) {
  StagedDir staged(dir);
  Model::write_config(staged.path() / "config.json", config, torch_dtype_name(store.dtype()));
  store.save(staged.path(), full_units);
  return staged;
}

template <class Model>
void save_hf_dir(const std::filesystem::path& dir, const typename Model::Config& config, const ParamStore& store,
                 std::span<const at::Tensor> full_units) {
  stage_hf_dir<Model>(dir, config, store, full_units).commit();
}

}  // namespace tessera
