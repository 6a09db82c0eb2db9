// implements: tessera::io::CheckpointDir (single-file or sharded Hugging Face weights) and write_checkpoint_dir.
#include "tessera/io/checkpoint_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/core/new_file.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/io/json_file.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw FormatError(path.string() + ": " + what);
}

// Hugging Face's shard naming, 1-based: model-00001-of-00003.safetensors.
std::string shard_file_name(std::size_t number, std::size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", number, count);
  return name;
}

bool is_shard_file_name(std::string_view name) {
  const auto all_digits = [](std::string_view text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  };
  return name.size() == shard_file_name(1, 1).size() && name.starts_with("model-") && all_digits(name.substr(6, 5)) &&
         name.substr(11, 4) == "-of-" && all_digits(name.substr(15, 5)) && name.ends_with(".safetensors");
}

bool is_existing_file(const fs::path& path) {
  std::error_code error;  // unreadable counts as absent; opening it then reports the cause
  return fs::is_regular_file(path, error);
}

// The index's weight_map grouped by shard: shard file name -> tensor names the index places there.
std::map<std::string, std::vector<std::string>> read_index(const fs::path& index_path) {
  const json index = read_json_file(index_path, "a sharded Hugging Face checkpoint needs its index");
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail(index_path, "must be a JSON object with a \"weight_map\" object {tensor name: shard file name}");
  }
  std::map<std::string, std::vector<std::string>> names_by_shard;
  for (const auto& [name, file] : index["weight_map"].items()) {
    const std::string file_name = file.is_string() ? file.get<std::string>() : "";
    if (file_name.empty() || file_name == "." || file_name == ".." || fs::path(file_name).has_parent_path()) {
      fail(index_path, "weight_map maps tensor '" + name.substr(0, 120) + "' to " + json_excerpt(file) +
                           " but a shard must be a plain file name in the same directory");
    }
    names_by_shard[file_name].push_back(name);
  }
  return names_by_shard;
}

// Greedy in the given order, as Hugging Face does: a tensor joins the current shard unless that would
// take the shard past max_shard_bytes; a tensor larger than the limit ends up in a shard of its own.
std::vector<std::span<const TensorView>> plan_shards(std::span<const TensorView> tensors, std::size_t max_shard_bytes) {
  std::vector<std::span<const TensorView>> shards;
  std::size_t first = 0;
  std::size_t shard_bytes = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::size_t bytes = tensors[i].data.size();
    if (i > first && shard_bytes + bytes > max_shard_bytes) {
      shards.push_back(tensors.subspan(first, i - first));
      first = i;
      shard_bytes = 0;
    }
    shard_bytes += bytes;
  }
  shards.push_back(tensors.subspan(first));  // an empty checkpoint still gets its one (empty) file
  return shards;
}

// Same temp-then-rename scheme as write_safetensors, for the index's text: a new file of its own beside `path`
// (core/new_file.hpp: never opened through a file or link already there), fsynced, then renamed onto it.
void write_text_atomically(const fs::path& path, const std::string& text) {
  PartialFile temp;
  try {
    temp = create_partial_file(path);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  try {
    if (!write_all(temp.fd, text)) fail(path, std::string("write failed: ") + std::strerror(errno));
    if (::fsync(temp.fd) != 0) fail(path, std::string("fsync failed: ") + std::strerror(errno));
    if (::close(std::exchange(temp.fd, -1)) != 0) fail(path, std::string("close failed: ") + std::strerror(errno));
    if (::rename(temp.path.c_str(), path.c_str()) != 0) {
      fail(path, "cannot rename " + temp.path.string() + " into place: " + std::strerror(errno));
    }
  } catch (...) {
    if (temp.fd >= 0) ::close(temp.fd);
    ::unlink(temp.path.c_str());
    unregister_partial_file(temp.path);
    throw;
  }
  unregister_partial_file(temp.path);
}

// Deletes the weight files of an earlier save that are not in `kept`: a stale model.safetensors would
// shadow a new index, and stale shards of another count would linger unreferenced.
void remove_stale_weight_files(const fs::path& dir, const std::set<std::string>& kept) {
  std::vector<fs::path> stale;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool weight_file = name == kSingleFile || name == kIndexFile || is_shard_file_name(name);
    if (weight_file && !kept.contains(name)) stale.push_back(entry.path());
  }
  if (error) fail(dir, "wrote the checkpoint but cannot list the directory to remove stale files: " + error.message());
  for (const auto& path : stale) {
    if (!fs::remove(path, error) && error) {
      fail(path, "wrote the new checkpoint but cannot remove this stale file of an earlier save: " + error.message());
    }
  }
}

}  // namespace

void write_text_file(const fs::path& path, const std::string& text) { write_text_atomically(path, text); }

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(dir, std::string("cannot open the directory to sync it: ") + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) fail(dir, std::string("fsync of the directory failed: ") + std::strerror(saved));
}

CheckpointDir CheckpointDir::open(const fs::path& dir) {
  CheckpointDir checkpoint;
  checkpoint.dir_ = dir;
  const fs::path single_path = dir / kSingleFile;
  const fs::path index_path = dir / kIndexFile;
  if (is_existing_file(single_path)) {
    checkpoint.add_shard(SafetensorsFile::open(single_path));
    return checkpoint;
  }
  if (!is_existing_file(index_path)) {
    fail(dir, std::string("no weights found: expected ") + kSingleFile + " or " + kIndexFile + " in this directory");
  }
  for (const auto& [file_name, names] : read_index(index_path)) {
    const fs::path shard_path = dir / file_name;
    if (!is_existing_file(shard_path)) {
      fail(index_path, "weight_map places tensor '" + names.front() + "' in shard '" + file_name + "' but " +
                           shard_path.string() + " does not exist");
    }
    SafetensorsFile shard = SafetensorsFile::open(shard_path);
    for (const auto& name : names) {
      if (!shard.find(name)) {
        fail(index_path, "weight_map places tensor '" + name + "' in shard '" + file_name +
                             "' but that shard has no tensor named '" + name + "'");
      }
    }
    checkpoint.add_shard(std::move(shard));
  }
  return checkpoint;
}

CheckpointDir CheckpointDir::open_file(const fs::path& file) {
  CheckpointDir checkpoint;
  checkpoint.dir_ = file.parent_path();
  if (!is_existing_file(file)) fail(file, "no such file");
  checkpoint.add_shard(SafetensorsFile::open(file));
  return checkpoint;
}

void CheckpointDir::add_shard(SafetensorsFile shard) {
  for (std::size_t i = 0; i < shard.tensors().size(); ++i) {
    const std::string& name = shard.tensors()[i].name;
    const auto [existing, inserted] = locations_.emplace(name, Location{shards_.size(), i});
    if (!inserted) {
      fail(dir_, "tensor '" + name + "' is in both " + shards_[existing->second.shard].path().filename().string() +
                     " and " + shard.path().filename().string() + "; each tensor must be in exactly one shard");
    }
  }
  shards_.push_back(std::move(shard));
}

const TensorInfo* CheckpointDir::find(std::string_view name) const {
  const auto found = locations_.find(name);
  if (found == locations_.end()) return nullptr;
  return &shards_[found->second.shard].tensors()[found->second.tensor];
}

const TensorInfo& CheckpointDir::info(std::string_view name) const {
  if (const TensorInfo* found = find(name)) return *found;
  fail(dir_, "no tensor named '" + std::string(name) + "' in this checkpoint (it has " +
                 std::to_string(locations_.size()) + " tensors)");
}

std::span<const std::byte> CheckpointDir::bytes(std::string_view name) const {
  const TensorInfo& tensor = info(name);
  return shards_[locations_.find(name)->second.shard].bytes(tensor);
}

std::vector<std::string> CheckpointDir::names() const {
  std::vector<std::string> names;
  for (const auto& [name, location] : locations_) names.push_back(name);
  return names;  // already sorted: std::map order
}

void write_checkpoint_dir(const fs::path& dir, std::span<const TensorView> tensors, std::size_t max_shard_bytes) {
  // write_safetensors sees one shard at a time, so a name repeated across shards is caught here.
  std::set<std::string_view> seen_names;
  std::uint64_t total_bytes = 0;
  for (const auto& tensor : tensors) {
    if (!seen_names.insert(tensor.name).second) {
      fail(dir, "cannot write tensor '" + tensor.name + "': the name appears twice; names must be unique");
    }
    total_bytes += tensor.data.size();
  }
  const auto shards = plan_shards(tensors, max_shard_bytes);

  std::error_code error;
  const bool dir_existed = fs::exists(dir, error);
  fs::create_directories(dir, error);
  if (error) fail(dir, "cannot create the checkpoint directory: " + error.message());

  // Hugging Face's loader rejects safetensors metadata without a known "format".
  const std::map<std::string, std::string> shard_metadata{{"format", "pt"}};
  std::set<std::string> written;  // file names inside dir
  try {
    if (shards.size() == 1) {
      write_safetensors(dir / kSingleFile, shards.front(), shard_metadata);
      written.insert(kSingleFile);
    } else {
      std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
      for (std::size_t i = 0; i < shards.size(); ++i) {
        const std::string file_name = shard_file_name(i + 1, shards.size());
        write_safetensors(dir / file_name, shards[i], shard_metadata);
        written.insert(file_name);
        for (const auto& tensor : shards[i]) weight_map.emplace(tensor.name, file_name);
      }
      const json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
      write_text_atomically(dir / kIndexFile, index.dump(2) + "\n");  // as HF: indent 2, sorted keys
      written.insert(kIndexFile);
    }
  } catch (...) {
    for (const auto& file_name : written) fs::remove(dir / file_name, error);
    if (!dir_existed) fs::remove(dir, error);  // only succeeds if empty, i.e. nothing else was put there
    throw;
  }
  remove_stale_weight_files(dir, written);
}

}  // namespace tessera::io
