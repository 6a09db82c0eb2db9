#pragma once
// defines: training-state checkpoints, the files behind checkpoint_dir= and resume= (docs/checkpoints.md).
//
// A checkpoint is a directory CHECKPOINT_DIR/step-00000005 (5 optimizer steps done) holding
//   rank-00000.safetensors ...  what each writing rank holds: its part of every unit's parameters, of the fp32
//                               masters under offload and of the optimizer's state
//   manifest.json               written last: the step, the experiment and settings that must match, the loss
//                               scaler, the optimizer's step count, and every rank file with its size and CRC-32C
// Parts are cut in each tensor's own coordinates (a unit's flat buffer, unpadded): a rank file's metadata says
// which elements [begin, begin + n) of which tensor it holds, so a run with another number of ranks reads the
// elements its own shards need from whichever files hold them (resharding). State that only makes sense in one
// shard layout (Adam8bit's block codes) is written as "local" tensors, read back by the same shard position of a
// run with the same shard group size. Replicated state is written once: by the ranks of the first replica.
//
// Writing is collective and all or nothing: rank 0 makes "step-N.partial-<pid>", every writing rank writes and
// fsyncs its file there, the ranks agree that all succeeded, rank 0 writes and fsyncs the manifest, fsyncs the
// directory and renames it into place. A failure on any rank (a full disk) is reported on every rank with the
// failing rank's reason, and the partial directory is removed: the newest complete checkpoint stays intact. A
// process killed mid-write leaves at most a ".partial-" directory, which resume=auto ignores and the next
// checkpoint removes. A run holds its checkpoint_dir alone (engine/checkpoint_dir_lock.hpp).
//
// Reading trusts nothing unchecked: every manifest field's type and range (check_manifest), each rank file's size
// and CRC-32C (checked when a rank first reads from the file, so a rank reads only the files it needs), every
// part tensor's elements covered by exactly one file, and each tensor's presence, element count and dtype against
// what the run asks for.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/dist/any_communicator.hpp"

namespace tessera {

// What one rank contributes to a checkpoint: host tensors (device tensors are copied when added; host ones are
// referenced, so the writer is used before the next step changes them).
class TrainStateWriter {
 public:
  // group_rank: this rank's position in its shard group (local tensors are filed under it).
  explicit TrainStateWriter(std::int64_t group_rank = 0) : group_rank_(group_rank) {}
  // Elements [begin, begin + part.numel()) of the 1-D tensor `name` of `numel` elements (a unit's parameters,
  // unpadded, or a per-element optimizer state). Only the elements below numel are kept: padding is not state.
  void add_part(const std::string& name, const at::Tensor& part, std::int64_t begin, std::int64_t numel);
  // A tensor read back whole by the same shard position of a run with the same shard group size.
  void add_local(const std::string& name, const at::Tensor& tensor);
  std::int64_t group_rank() const { return group_rank_; }

  struct Entry {
    std::string name;
    at::Tensor host;          // contiguous CPU tensor (the state itself when it lives there; written at once)
    std::int64_t begin = -1;  // -1: a local tensor
    std::int64_t numel = 0;   // the whole tensor's elements (parts)
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::int64_t group_rank_;
  std::vector<Entry> entries_;
};

// A complete checkpoint, opened: the manifest (check_manifest) and every rank file's header (the files are mapped,
// not read). FormatError, naming the file and the fix, for a missing manifest or file, a file of another size or
// CRC-32C than the manifest says (truncated, a flipped byte, replaced), a corrupt header, a part tensor whose
// elements are not each in exactly one file, a local tensor written twice, or optimizer state beside a manifest
// that says the optimizer had none.
class TrainStateReader {
 public:
  explicit TrainStateReader(const std::filesystem::path& dir);
  ~TrainStateReader();
  TrainStateReader(TrainStateReader&&) noexcept;
  TrainStateReader& operator=(TrainStateReader&&) = delete;

  const nlohmann::json& manifest() const { return manifest_; }
  const std::filesystem::path& dir() const { return dir_; }
  std::int64_t step() const;
  bool has(const std::string& name) const;
  // Fills dst (1-D, on any device, in the dtype the tensor was written in) with elements [begin, begin +
  // dst.numel()) of `name`, a tensor of `numel` elements in this run; elements at or past numel are zeroed
  // (padding). FormatError when the checkpoint has no such tensor (and numel > 0), or one of another numel or dtype.
  void read_part(const std::string& name, const at::Tensor& dst, std::int64_t begin, std::int64_t numel) const;
  // Fills dst with the local tensor `name` that shard position group_rank wrote (same shape and dtype).
  void read_local(const std::string& name, const at::Tensor& dst, std::int64_t group_rank) const;

 private:
  struct Files;
  void index_tensors();  // the files' tensors by name, each part tensor's elements checked to be in one file each
  std::filesystem::path dir_;
  nlohmann::json manifest_;
  std::unique_ptr<Files> files_;
};

namespace train_state {

// The manifest's "format" and "version". Version 2 added each rank file's "crc32c"; 1 (without) is refused.
inline constexpr const char* format_name = "tessera train state";
inline constexpr int format_version = 2;

// Checks every field of a checkpoint's manifest for its type and range, throwing FormatError that names the file
// (`where`), the field ("optimizer.steps"), the value seen and what it must be:
//   format "tessera train state"; version format_version; step >= 0; world_size >= 1; shard_group_size dividing it;
//   units >= 1; experiment and settings objects; optimizer {name: string, has_state: boolean, steps: 0..step};
//   loss_scaler {scale: finite > 0, good_in_a_row, skipped, growths: 0..step}; files: a non-empty array of
//   {name: a plain file name, once; bytes >= 0; crc32c: 8 lowercase hex digits}.
// After it, reading any of these with at() and get<>() cannot throw. Returns the step.
std::int64_t check_manifest(const nlohmann::json& manifest, const std::filesystem::path& where);

// "step-00000005".
std::string step_dir_name(std::int64_t step);
// The complete checkpoint with the most steps in checkpoint_dir (a step-N dir with a manifest), or nullopt. Steps
// are the manifests' own (a renamed directory does not jump the queue); the name's when a manifest is unreadable,
// so that a damaged newest checkpoint is refused when resumed rather than silently passed over.
std::optional<std::filesystem::path> newest(const std::filesystem::path& checkpoint_dir);

// Collective over `world`: writes `mine` (when `writes`: this rank holds state no lower rank already wrote) and,
// on rank 0, `manifest` (its "format", "version", "step" and "files" entries filled in) as checkpoint_dir/step-N,
// then keeps the newest keep_last checkpoints by their manifests' steps (0: all), never deleting step N. Returns
// the checkpoint's path and its bytes on disk. Throws Error on every rank when any rank fails, with that rank's
// reason; nothing of step N is left then.
struct Saved {
  std::filesystem::path path;
  std::int64_t bytes = 0;
};
Saved save(const std::filesystem::path& checkpoint_dir, std::int64_t step, const TrainStateWriter& mine, bool writes,
           nlohmann::json manifest, dist::AnyCommunicator world, c10::Device device, std::int64_t keep_last);

// Collective: the message of the lowest-numbered rank whose `mine` is set, on every rank; nullopt when none is.
// `device`: where the world's collectives take their tensors.
std::optional<std::string> first_failure(dist::AnyCommunicator world, c10::Device device,
                                         const std::optional<std::string>& mine);

// Compares the manifest's "experiment" and "settings" objects with this run's: the first difference as
// "<key>: the checkpoint has X, this run has Y", or nullopt when they agree.
std::optional<std::string> difference(const nlohmann::json& checkpoint, const nlohmann::json& run);

}  // namespace train_state

}  // namespace tessera
