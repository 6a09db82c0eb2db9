#pragma once
// defines: tessera::io::CheckpointDir, the weights of a Hugging Face model directory
// (model.safetensors, or model.safetensors.index.json plus its shards), and write_checkpoint_dir.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/io/safetensors.hpp"

namespace tessera::io {

class CheckpointDir {
 public:
  // Opens DIR/model.safetensors if present, else DIR/model.safetensors.index.json
  // ({"metadata":{...},"weight_map":{name: file}}), opening each referenced shard once. Every name in
  // weight_map must exist in the shard it names, and a tensor name present in two shards is an error.
  // A directory with neither file is an error naming both expected file names. Throws FormatError.
  static CheckpointDir open(const std::filesystem::path& dir);
  // One safetensors file under the same interface (a PEFT adapter_model.safetensors, say).
  static CheckpointDir open_file(const std::filesystem::path& file);

  const TensorInfo* find(std::string_view name) const;            // nullptr if absent
  std::span<const std::byte> bytes(std::string_view name) const;  // throws FormatError naming tensor and dir
  const TensorInfo& info(std::string_view name) const;            // throws likewise
  std::vector<std::string> names() const;                         // all tensor names, sorted
  const std::filesystem::path& dir() const { return dir_; }       // the directory (a file's parent for open_file)

 private:
  struct Location {
    std::size_t shard;   // index into shards_
    std::size_t tensor;  // index into that shard's tensors()
  };

  CheckpointDir() = default;
  void add_shard(SafetensorsFile shard);

  std::filesystem::path dir_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, Location, std::less<>> locations_;
};

// Writes DIR/model.safetensors, or when the total exceeds max_shard_bytes,
// DIR/model-00001-of-0000K.safetensors ... plus DIR/model.safetensors.index.json with
// {"metadata":{"total_size":N},"weight_map":{...}} (Hugging Face's naming). Shards fill in the given
// order; a tensor larger than max_shard_bytes gets a shard of its own. Creates DIR if needed.
// Atomic per file; on error removes whatever it wrote. After success it deletes the other layout's
// files left by an earlier save (a stale model.safetensors would shadow a new index on open()).
void write_checkpoint_dir(const std::filesystem::path& dir, std::span<const TensorView> tensors,
                          std::size_t max_shard_bytes = 5ull << 30);

// Writes `text` to `path` as write_safetensors writes (a temporary file, fsync, rename); FormatError naming the
// path and the system's reason (a full disk, say) on failure, leaving nothing behind.
void write_text_file(const std::filesystem::path& path, const std::string& text);
// fsync of a directory: makes the renames into it durable.
void sync_directory(const std::filesystem::path& dir);

}  // namespace tessera::io
