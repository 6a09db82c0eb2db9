// implements: engine/train_state.hpp.
#include "tessera/engine/train_state.hpp"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <sstream>
#include <system_error>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/io/safetensors.hpp"

namespace tessera {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "tessera train state";
constexpr const char* kManifest = "manifest.json";

std::string rank_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.safetensors", rank);
  return name;
}

[[noreturn]] void damaged(const fs::path& where, const std::string& what) {
  throw FormatError(where.string() + ": " + what +
                    "; this checkpoint is damaged: resume from an older one (resume=checkpoint_dir/step-N)");
}

// "part <begin> <numel>" or "local <group_rank>".
struct Placement {
  bool local = false;
  std::int64_t a = 0, b = 0;
};
std::optional<Placement> parse_placement(const std::string& text) {
  std::istringstream in(text);
  std::string kind;
  Placement p;
  in >> kind;
  if (kind == "part") {
    p.local = false;
    if (!(in >> p.a >> p.b) || p.a < 0 || p.b < 0) return std::nullopt;
  } else if (kind == "local") {
    p.local = true;
    if (!(in >> p.a) || p.a < 0) return std::nullopt;
  } else {
    return std::nullopt;
  }
  std::string rest;
  if (in >> rest) return std::nullopt;
  return p;
}

}  // namespace

// ---- writer -------------------------------------------------------------------------------------------------

void TrainStateWriter::add_part(const std::string& name, const at::Tensor& part, std::int64_t begin, std::int64_t numel) {
  if (!part.defined()) return;
  const std::int64_t kept = std::clamp<std::int64_t>(numel - begin, 0, part.numel());
  if (kept == 0) return;  // this rank's part is all padding
  entries_.push_back({name, part.detach().reshape({-1}).narrow(0, 0, kept).to(at::kCPU).contiguous(), begin, numel});
}

void TrainStateWriter::add_local(const std::string& name, const at::Tensor& tensor) {
  if (!tensor.defined()) return;
  entries_.push_back({name, tensor.detach().to(at::kCPU).contiguous(), -1, tensor.numel()});
}

// ---- reader -------------------------------------------------------------------------------------------------

struct TrainStateReader::Files {
  struct Part {
    std::size_t file;
    const io::TensorInfo* info;
    std::int64_t begin, numel;
  };
  std::vector<io::SafetensorsFile> files;
  std::map<std::string, std::vector<Part>, std::less<>> parts;
  std::map<std::pair<std::string, std::int64_t>, std::pair<std::size_t, const io::TensorInfo*>> locals;
};

TrainStateReader::TrainStateReader(const fs::path& dir) : dir_(dir), files_(std::make_unique<Files>()) {
  const fs::path manifest_path = dir / kManifest;
  if (!fs::is_regular_file(manifest_path))
    throw FormatError(dir.string() + ": no manifest.json, so not a complete tessera checkpoint (a write that was cut "
                      "short leaves none); give a checkpoint_dir/step-N dir, or resume=auto");
  manifest_ = io::read_json_file(manifest_path, "a tessera checkpoint manifest");
  const auto need = [&](const char* key, bool ok) {
    if (!ok) damaged(manifest_path, std::string("\"") + key + "\" is missing or malformed");
  };
  // Every field a reader of the manifest uses is checked for its type here (the trainer reads world_size and
  // shard_group_size with value()), so a hand-edited manifest is refused with its name, never a JSON type error.
  need("format", manifest_.is_object() && manifest_.contains("format") && manifest_["format"] == kFormat);
  for (const char* key : {"world_size", "shard_group_size"})
    need(key, !manifest_.contains(key) ||
                  (manifest_[key].is_number_integer() && manifest_[key].get<std::int64_t>() >= 0));
  if (!manifest_.contains("version") || !manifest_["version"].is_number_integer() ||
      manifest_["version"].get<int>() != train_state::format_version)
    throw FormatError(manifest_path.string() + ": checkpoint format version " +
                      (manifest_.contains("version") ? io::json_excerpt(manifest_["version"]) : std::string("(none)")) +
                      ", and this tessera reads version " + std::to_string(train_state::format_version) +
                      "; resume with the tessera that wrote it");
  need("step", manifest_.contains("step") && manifest_["step"].is_number_integer() && manifest_["step"].get<std::int64_t>() >= 0);
  need("files", manifest_.contains("files") && manifest_["files"].is_array());
  for (const nlohmann::json& f : manifest_["files"]) {
    need("files", f.is_object() && f.contains("name") && f["name"].is_string() && f.contains("bytes") &&
                      f["bytes"].is_number_integer());
    const std::string name = f["name"].get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name.starts_with("."))
      damaged(manifest_path, "file name " + io::json_excerpt(f["name"]) + " is not a plain file name");
    const fs::path path = dir / name;
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) damaged(path, "missing (the manifest lists it)");
    if (static_cast<std::int64_t>(size) != f["bytes"].get<std::int64_t>())
      damaged(path, "holds " + std::to_string(size) + " bytes and the manifest says " +
                        std::to_string(f["bytes"].get<std::int64_t>()) + " (truncated or replaced)");
    files_->files.push_back(io::SafetensorsFile::open(path));
  }
  for (std::size_t i = 0; i < files_->files.size(); ++i) {
    const io::SafetensorsFile& file = files_->files[i];
    for (const io::TensorInfo& info : file.tensors()) {
      const auto it = file.metadata().find(info.name);
      const std::optional<Placement> where =
          it == file.metadata().end() ? std::nullopt : parse_placement(it->second);
      if (!where) damaged(file.path(), "tensor '" + info.name + "' has no valid placement in the metadata");
      if (where->local) {
        files_->locals[{info.name, where->a}] = {i, &info};
      } else {
        if (info.shape.size() != 1 || where->a + info.numel() > where->b)
          damaged(file.path(), "part '" + info.name + "' does not fit its tensor");
        files_->parts[info.name].push_back({i, &info, where->a, where->b});
      }
    }
  }
}

TrainStateReader::~TrainStateReader() = default;
TrainStateReader::TrainStateReader(TrainStateReader&&) noexcept = default;

std::int64_t TrainStateReader::step() const { return manifest_["step"].get<std::int64_t>(); }

bool TrainStateReader::has(const std::string& name) const {
  if (files_->parts.contains(name)) return true;
  for (const auto& [key, value] : files_->locals)
    if (key.first == name) return true;
  return false;
}

void TrainStateReader::read_part(const std::string& name, const at::Tensor& dst, std::int64_t begin) const {
  const std::int64_t length = dst.numel();
  at::Tensor host = at::zeros({length}, at::TensorOptions().dtype(dst.scalar_type()));
  const auto found = files_->parts.find(name);
  std::int64_t numel = 0;
  if (found != files_->parts.end()) numel = found->second.front().numel;
  const std::int64_t needed = std::max<std::int64_t>(0, std::min(begin + length, numel) - begin);
  std::int64_t covered = 0;
  if (found != files_->parts.end()) {
    const std::size_t element = c10::elementSize(dst.scalar_type());
    for (const Files::Part& p : found->second) {
      const io::SafetensorsFile& file = files_->files[p.file];
      if (p.numel != numel) damaged(file.path(), "the parts of '" + name + "' disagree on its size");
      if (to_scalar_type(p.info->dtype) != dst.scalar_type())
        throw FormatError(file.path().string() + ": '" + name + "' was written in " +
                          std::string(io::dtype_name(p.info->dtype)) + " and this run keeps it in " +
                          c10::toString(dst.scalar_type()) + "; resume with the precision the checkpoint was written with");
      const std::int64_t lo = std::max(begin, p.begin), hi = std::min(begin + length, p.begin + p.info->numel());
      if (lo >= hi) continue;
      const std::span<const std::byte> bytes = file.bytes(*p.info);
      std::memcpy(static_cast<std::byte*>(host.data_ptr()) + static_cast<std::size_t>(lo - begin) * element,
                  bytes.data() + static_cast<std::size_t>(lo - p.begin) * element,
                  static_cast<std::size_t>(hi - lo) * element);
      covered += hi - lo;
    }
  }
  if (covered != needed)
    damaged(dir_, "holds " + std::to_string(covered) + " of the " + std::to_string(needed) + " elements of '" + name +
                      "' from " + std::to_string(begin) + " that this rank needs");
  dst.detach().reshape({-1}).copy_(host);
}

void TrainStateReader::read_local(const std::string& name, const at::Tensor& dst, std::int64_t group_rank) const {
  const auto found = files_->locals.find({name, group_rank});
  if (found == files_->locals.end())
    damaged(dir_, "has no '" + name + "' for shard position " + std::to_string(group_rank));
  const auto& [file_index, info] = found->second;
  const io::SafetensorsFile& file = files_->files[file_index];
  at::Tensor t = tensor_from_bytes(*info, file.bytes(*info));
  if (t.scalar_type() != dst.scalar_type() || t.numel() != dst.numel())
    damaged(file.path(), "'" + name + "' holds " + std::to_string(t.numel()) + " " + c10::toString(t.scalar_type()) +
                             " values and this run's holds " + std::to_string(dst.numel()) + " " +
                             c10::toString(dst.scalar_type()));
  dst.detach().reshape({-1}).copy_(t.reshape({-1}));
}

// ---- saving -------------------------------------------------------------------------------------------------

namespace train_state {

std::string step_dir_name(std::int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

namespace {

// The steps of the complete checkpoints in dir, ascending.
std::vector<std::pair<std::int64_t, fs::path>> complete_checkpoints(const fs::path& dir) {
  std::vector<std::pair<std::int64_t, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("step-") || name.find('.') != std::string::npos) continue;
    std::int64_t step = 0;
    const char* first = name.data() + 5;
    const auto [ptr, err] = std::from_chars(first, name.data() + name.size(), step);
    if (err != std::errc() || ptr != name.data() + name.size()) continue;
    if (fs::is_regular_file(entry.path() / kManifest, ec)) out.emplace_back(step, entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Directories a killed write left ("step-N.partial-<pid>", "step-N.old-<pid>").
void remove_leftovers(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("step-") &&
        (name.find(".partial-") != std::string::npos || name.find(".old-") != std::string::npos))
      stale.push_back(entry.path());
  }
  for (const fs::path& p : stale) fs::remove_all(p, ec);
}

}  // namespace

std::optional<fs::path> newest(const fs::path& checkpoint_dir) {
  const auto all = complete_checkpoints(checkpoint_dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

std::optional<std::string> first_failure(dist::AnyCommunicator world, c10::Device device,
                                         const std::optional<std::string>& mine) {
  if (world.empty() || world.size() == 1) return mine;
  const int size = world.size(), rank = world.rank();
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  at::Tensor who = at::full({1}, mine ? static_cast<std::int64_t>(size - rank) : 0, longs);
  world.all_reduce(who, dist::ReduceOp::max);
  const std::int64_t top = who.item<std::int64_t>();
  if (top == 0) return std::nullopt;
  const int failed = size - static_cast<int>(top);
  constexpr std::int64_t kChars = 1024;
  at::Tensor text = at::zeros({kChars}, at::TensorOptions().dtype(at::kInt));
  if (rank == failed) {
    const std::string& m = *mine;
    for (std::int64_t i = 0; i < kChars - 1 && i < static_cast<std::int64_t>(m.size()); ++i)
      text[i] = static_cast<int>(static_cast<unsigned char>(m[static_cast<std::size_t>(i)]));
  }
  at::Tensor moved = text.to(device);
  world.broadcast(moved, failed);
  text = moved.to(at::kCPU);
  std::string message;
  const int* chars = text.data_ptr<int>();
  for (std::int64_t i = 0; i < kChars && chars[i] != 0; ++i) message.push_back(static_cast<char>(chars[i]));
  return message;
}

Saved save(const fs::path& checkpoint_dir, std::int64_t step, const TrainStateWriter& mine, bool writes,
           nlohmann::json manifest, dist::AnyCommunicator world, c10::Device device, std::int64_t keep_last) {
  const int rank = world.empty() ? 0 : world.rank();
  const int size = world.empty() ? 1 : world.size();
  const fs::path target = normalized_path(checkpoint_dir / step_dir_name(step));
  const std::string where = "step " + std::to_string(step) + "'s checkpoint";
  const auto agree = [&](const std::optional<std::string>& local) {
    if (std::optional<std::string> failure = first_failure(world, device, local)) throw Error(*failure);
  };

  // 1. Rank 0 makes the staging directory; every rank learns its name (rank 0's pid is in it).
  std::optional<StagedDir> staged;
  std::optional<std::string> failure;
  std::int64_t pid = 0;
  if (rank == 0) {
    try {
      fs::create_directories(checkpoint_dir);
      remove_leftovers(checkpoint_dir);
      staged.emplace(target);
      pid = ::getpid();
    } catch (const std::exception& e) {
      failure = "rank 0 could not start " + where + ": " + e.what();
    }
  }
  agree(failure);
  if (size > 1) {
    at::Tensor t = at::full({1}, pid, at::TensorOptions().dtype(at::kLong).device(device));
    world.all_reduce(t, dist::ReduceOp::max);
    pid = t.item<std::int64_t>();
  }
  fs::path staging = target;
  staging += ".partial-" + std::to_string(pid);

  // 2. Each writing rank writes and fsyncs its file.
  std::int64_t my_bytes = 0;
  if (writes) {
    try {
      std::vector<io::TensorView> views;
      std::map<std::string, std::string> metadata{{"format", kFormat}};
      for (const TrainStateWriter::Entry& e : mine.entries()) {
        views.push_back(tensor_view(e.name, e.host));
        metadata[e.name] = e.begin < 0 ? "local " + std::to_string(mine.group_rank())
                                       : "part " + std::to_string(e.begin) + " " + std::to_string(e.numel);
      }
      const fs::path file = staging / rank_file_name(rank);
      io::write_safetensors(file, views, metadata);
      my_bytes = static_cast<std::int64_t>(fs::file_size(file));
    } catch (const std::exception& e) {
      failure = "rank " + std::to_string(rank) + " could not write its part of " + where + ": " + e.what();
    }
  }
  try {
    agree(failure);
  } catch (...) {
    staged.reset();  // rank 0 removes the staging directory
    throw;
  }

  // 3. Every file's size, for the manifest (a truncated file is caught on resume).
  at::Tensor sizes = at::zeros({size}, at::TensorOptions().dtype(at::kLong));
  sizes[rank] = my_bytes;
  if (size > 1) {
    at::Tensor moved = sizes.to(device);
    world.all_reduce(moved, dist::ReduceOp::sum);
    sizes = moved.to(at::kCPU);
  }

  // 4. Rank 0: the manifest, the directory synced, the rename, the old checkpoints.
  Saved saved{target, 0};
  if (rank == 0) {
    try {
      nlohmann::json files = nlohmann::json::array();
      for (int r = 0; r < size; ++r) {
        const std::int64_t b = sizes[r].item<std::int64_t>();
        if (b > 0) files.push_back({{"name", rank_file_name(r)}, {"bytes", b}});
        saved.bytes += b;
      }
      manifest["format"] = kFormat;
      manifest["version"] = format_version;
      manifest["step"] = step;
      manifest["files"] = std::move(files);
      io::write_text_file(staging / kManifest, manifest.dump(1) + "\n");
      io::sync_directory(staging);
      std::error_code ec;
      fs::path old;
      if (fs::exists(target, ec)) {  // the same step written again (a resumed run that stopped where it began)
        old = target;
        old += ".old-" + std::to_string(pid);
        fs::rename(target, old);
      }
      staged->commit();
      if (!old.empty()) fs::remove_all(old, ec);
      io::sync_directory(checkpoint_dir);
      if (keep_last > 0) {
        const auto all = complete_checkpoints(checkpoint_dir);
        for (std::size_t i = 0; i + static_cast<std::size_t>(keep_last) < all.size(); ++i)
          fs::remove_all(all[i].second, ec);
      }
    } catch (const std::exception& e) {
      failure = "rank 0 could not finish " + where + ": " + e.what();
      staged.reset();
    }
  }
  agree(failure);
  return saved;
}

std::optional<std::string> difference(const nlohmann::json& checkpoint, const nlohmann::json& run) {
  for (const char* section : {"experiment", "settings"}) {
    const nlohmann::json& mine = run.contains(section) ? run[section] : nlohmann::json::object();
    const nlohmann::json theirs = checkpoint.contains(section) && checkpoint[section].is_object()
                                      ? checkpoint[section]
                                      : nlohmann::json::object();
    for (const auto& [key, value] : mine.items()) {
      const nlohmann::json other = theirs.contains(key) ? theirs[key] : nlohmann::json();
      if (other != value)
        return key + ": the checkpoint has " + (other.is_null() ? std::string("none") : io::json_excerpt(other, 120)) +
               ", this run has " + io::json_excerpt(value, 120);
    }
  }
  return std::nullopt;
}

}  // namespace train_state

}  // namespace tessera
