#pragma once
// defines: save_hf_dir, writing trained weights as a Hugging Face model directory
// (config.json + model.safetensors, or shards + index) from one full buffer per unit. The directory appears
// whole or not at all: it is written beside the target under a temporary name (core/partial_files.hpp) and
// renamed at the end; `dir` may be spelled with a trailing separator ("out/"). The files beside the weights that
// say how inputs are prepared (the image processor's and the tokenizer's, generation defaults) are copied from the
// run's model_dir, so that the saved dir loads as the one it came from did (AutoImageProcessor, AutoTokenizer).
#include <array>
#include <filesystem>
#include <span>
#include <string_view>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/engine/param_store.hpp"
#include "tessera/engine/tensor_bytes.hpp"

namespace tessera {

// What save_pretrained of a model's processor or tokenizer writes beside config.json, as Hugging Face names it.
inline constexpr std::array<std::string_view, 9> kCompanionFiles{
    "preprocessor_config.json", "tokenizer.json",    "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
    "added_tokens.json",        "vocab.json",        "merges.txt",            "generation_config.json"};

// Copies the companion files present in `from` (a model_dir; empty: none) into `to`. Error naming the file when one
// cannot be copied.
void copy_companion_files(const std::filesystem::path& from, const std::filesystem::path& to);

// Writes the directory under its temporary name and returns it uncommitted: the caller moves it into place
// (commit()) once everything else the run must finish has succeeded, or drops it. `source`: the model_dir the run
// started from, whose companion files are copied (empty: a preset, none).
template <class Model>
StagedDir stage_hf_dir(const std::filesystem::path& dir, const typename Model::Config& config, const ParamStore& store,
                       std::span<const at::Tensor> full_units, const std::filesystem::path& source = {}) {
  StagedDir staged(dir);
  Model::write_config(staged.path() / "config.json", config, torch_dtype_name(store.dtype()));
  store.save(staged.path(), full_units);
  copy_companion_files(source, staged.path());
  return staged;
}

template <class Model>
void save_hf_dir(const std::filesystem::path& dir, const typename Model::Config& config, const ParamStore& store,
                 std::span<const at::Tensor> full_units, const std::filesystem::path& source = {}) {
  stage_hf_dir<Model>(dir, config, store, full_units, source).commit();
}

}  // namespace tessera
