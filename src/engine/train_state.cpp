// implements: engine/train_state.hpp.
#include "tessera/engine/train_state.hpp"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/core/crc32c.hpp"
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

constexpr const char* kFormat = train_state::format_name;
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

namespace {

// CRC-32C of the whole file, read in 4 MiB pieces. FormatError naming the file when it cannot be read.
std::uint32_t file_crc32c(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FormatError(path.string() + ": cannot open it for its checksum: " + std::strerror(errno));
  std::vector<std::byte> buffer(4u << 20);
  std::uint32_t crc = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw FormatError(path.string() + ": cannot read it for its checksum: " + std::strerror(error));
    }
    if (n == 0) break;
    crc = crc32c(std::span<const std::byte>(buffer.data(), static_cast<std::size_t>(n)), crc);
  }
  ::close(fd);
  return crc;
}

[[noreturn]] void checksum_differs(const fs::path& file, std::uint32_t actual, std::uint32_t listed) {
  damaged(file, "its CRC-32C is " + crc32c_hex(actual) + " and the manifest says " + crc32c_hex(listed) +
                    " (a byte changed since it was written: a disk or copy error, or an edit)");
}

// Tensors other than a unit's parameters and fp32 masters ("3.exp_avg", "3.m_codes") are the optimizer's state.
bool is_optimizer_state(std::string_view name) {
  const std::string_view what = name.substr(name.find('.') == std::string_view::npos ? 0 : name.find('.') + 1);
  return what != "param" && what != "master";
}

}  // namespace

struct TrainStateReader::Files {
  struct Part {
    std::size_t file;
    const io::TensorInfo* info;
    std::int64_t begin, numel;
  };
  std::vector<io::SafetensorsFile> files;
  std::vector<std::uint32_t> crcs;    // per file, from the manifest
  std::vector<char> checked;          // per file: its CRC-32C was checked (before its first read)
  std::map<std::string, std::vector<Part>, std::less<>> parts;  // each name's parts, by begin
  std::map<std::pair<std::string, std::int64_t>, std::pair<std::size_t, const io::TensorInfo*>> locals;

  // The file's bytes are what the manifest says, or FormatError naming it: once per file, on first use.
  void check(std::size_t i) {
    if (checked[i]) return;
    const fs::path& path = files[i].path();
    if (const std::uint32_t crc = file_crc32c(path); crc != crcs[i]) checksum_differs(path, crc, crcs[i]);
    checked[i] = 1;
  }
  void check_all() {
    for (std::size_t i = 0; i < files.size(); ++i) check(i);
  }
};

TrainStateReader::TrainStateReader(const fs::path& dir) : dir_(dir), files_(std::make_unique<Files>()) {
  const fs::path manifest_path = dir / kManifest;
  if (!fs::is_regular_file(manifest_path))
    throw FormatError(dir.string() + ": no manifest.json, so not a complete tessera checkpoint (a write that was cut "
                      "short leaves none); give a checkpoint_dir/step-N dir, or resume=auto");
  manifest_ = io::read_json_file(manifest_path, "a tessera checkpoint manifest");
  // Every field anyone reads of the manifest (the trainer, OptimizerStep) is checked here for its type and range,
  // so a hand-edited manifest is refused with the field's name, never a JSON type error or a wrong value used.
  train_state::check_manifest(manifest_, manifest_path);
  for (const nlohmann::json& f : manifest_["files"]) {
    const fs::path path = dir / f["name"].get<std::string>();
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) damaged(path, "missing (the manifest lists it)");
    if (static_cast<std::int64_t>(size) != f["bytes"].get<std::int64_t>())
      damaged(path, "holds " + std::to_string(size) + " bytes and the manifest says " +
                        std::to_string(f["bytes"].get<std::int64_t>()) + " (truncated or replaced)");
    const std::uint32_t crc = *parse_crc32c(f["crc32c"].get<std::string>());
    try {
      files_->files.push_back(io::SafetensorsFile::open(path));
    } catch (const FormatError&) {  // an unreadable header: a checksum that disagrees is the better message
      if (const std::uint32_t actual = file_crc32c(path); actual != crc) checksum_differs(path, actual, crc);
      throw;
    }
    files_->crcs.push_back(crc);
    files_->checked.push_back(0);
  }
  // A file whose structure is wrong (a placement, a part that does not fit) may be a file whose bytes changed: its
  // checksum, when it disagrees, is the message.
  try {
    index_tensors();
  } catch (const FormatError&) {
    files_->check_all();
    throw;
  }
}

void TrainStateReader::index_tensors() {
  const bool has_state = manifest_["optimizer"]["has_state"].get<bool>();
  for (std::size_t i = 0; i < files_->files.size(); ++i) {
    const io::SafetensorsFile& file = files_->files[i];
    for (const io::TensorInfo& info : file.tensors()) {
      const auto it = file.metadata().find(info.name);
      const std::optional<Placement> where =
          it == file.metadata().end() ? std::nullopt : parse_placement(it->second);
      if (!where) damaged(file.path(), "tensor '" + info.name + "' has no valid placement in the metadata");
      if (!has_state && is_optimizer_state(info.name))
        damaged(file.path(), "holds the optimizer's state '" + info.name + "' and the manifest's "
                             "\"optimizer.has_state\" is false");
      if (where->local) {
        if (!files_->locals.emplace(std::pair(info.name, where->a), std::pair(i, &info)).second)
          damaged(file.path(), "local tensor '" + info.name + "' of shard position " + std::to_string(where->a) +
                                   " is in another rank file too");
      } else {
        if (info.shape.size() != 1 || where->a > where->b - info.numel())
          damaged(file.path(), "part '" + info.name + "' does not fit its tensor");
        files_->parts[info.name].push_back({i, &info, where->a, where->b});
      }
    }
  }
  // Every element of every part tensor in exactly one file: [0, numel) tiled by the parts.
  for (auto& entry : files_->parts) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture one
    std::vector<Files::Part>& parts = entry.second;
    if (std::any_of(files_->locals.begin(), files_->locals.end(), [&](const auto& l) { return l.first.first == name; }))
      damaged(dir_, "'" + name + "' is both a part tensor and a local one");
    std::sort(parts.begin(), parts.end(), [](const Files::Part& a, const Files::Part& b) { return a.begin < b.begin; });
    std::int64_t next = 0;
    for (const Files::Part& p : parts) {
      const fs::path& file = files_->files[p.file].path();
      if (p.numel != parts.front().numel) damaged(file, "the parts of '" + name + "' disagree on its size");
      if (p.begin < next)
        damaged(file, "elements from " + std::to_string(p.begin) + " of '" + name + "' are in another rank file too; "
                      "each element must be in exactly one");
      if (p.begin > next)
        damaged(dir_, "elements [" + std::to_string(next) + ", " + std::to_string(p.begin) + ") of '" + name +
                          "' are in no rank file");
      next = p.begin + p.info->numel();
    }
    if (next != parts.front().numel)
      damaged(dir_, "elements [" + std::to_string(next) + ", " + std::to_string(parts.front().numel) + ") of '" +
                        name + "' are in no rank file");
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

void TrainStateReader::read_part(const std::string& name, const at::Tensor& dst, std::int64_t begin,
                                 std::int64_t numel) const {
  const std::int64_t length = dst.numel();
  at::Tensor host = at::zeros({length}, at::TensorOptions().dtype(dst.scalar_type()));
  const auto found = files_->parts.find(name);
  if (found == files_->parts.end() && numel > 0) {
    files_->check_all();  // a changed placement, say: then the checksum is the message
    damaged(dir_, "has no tensor '" + name + "' (" + std::to_string(numel) + " elements), which this run needs");
  }
  if (found != files_->parts.end() && found->second.front().numel != numel) {
    files_->check_all();
    damaged(dir_, "'" + name + "' holds " + std::to_string(found->second.front().numel) +
                      " elements and this run's has " + std::to_string(numel) +
                      "; resume with the model and settings that wrote the checkpoint");
  }
  const std::int64_t needed = std::max<std::int64_t>(0, std::min(begin + length, numel) - begin);
  std::int64_t covered = 0;
  if (found != files_->parts.end()) {
    const std::size_t element = c10::elementSize(dst.scalar_type());
    for (const Files::Part& p : found->second) {
      const io::SafetensorsFile& file = files_->files[p.file];
      if (to_scalar_type(p.info->dtype) != dst.scalar_type())
        throw FormatError(file.path().string() + ": '" + name + "' was written in " +
                          std::string(io::dtype_name(p.info->dtype)) + " and this run keeps it in " +
                          c10::toString(dst.scalar_type()) + "; resume with the precision the checkpoint was written with");
      const std::int64_t lo = std::max(begin, p.begin), hi = std::min(begin + length, p.begin + p.info->numel());
      if (lo >= hi) continue;
      files_->check(p.file);
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
  if (found == files_->locals.end()) {
    files_->check_all();
    damaged(dir_, "has no '" + name + "' for shard position " + std::to_string(group_rank));
  }
  const auto& [file_index, info] = found->second;
  const io::SafetensorsFile& file = files_->files[file_index];
  files_->check(file_index);
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

// The complete checkpoints in dir (step-N directories with a manifest), oldest first: by the step their manifest
// names, which a renamed or copied directory keeps; by N when the manifest cannot be read (then the reader, not
// this listing, says what is wrong with it). Ties: by N.
std::vector<std::pair<std::int64_t, fs::path>> complete_checkpoints(const fs::path& dir) {
  std::vector<std::tuple<std::int64_t, std::int64_t, fs::path>> found;  // (step, N, path)
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("step-") || name.find('.') != std::string::npos) continue;
    std::int64_t named = 0;
    const char* first = name.data() + 5;
    const auto [ptr, err] = std::from_chars(first, name.data() + name.size(), named);
    if (err != std::errc() || ptr != name.data() + name.size()) continue;
    if (!fs::is_regular_file(entry.path() / kManifest, ec)) continue;
    std::int64_t step = named;
    try {
      const nlohmann::json m = io::read_json_file(entry.path() / kManifest, "a tessera checkpoint manifest");
      const auto it = m.is_object() ? m.find("step") : m.end();
      if (it != m.end() && it->is_number_integer() && it->get<std::int64_t>() >= 0) step = it->get<std::int64_t>();
    } catch (const Error&) {
    }
    found.emplace_back(step, named, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::pair<std::int64_t, fs::path>> out;
  for (auto& [step, named, path] : found) out.emplace_back(step, std::move(path));
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

  // 2. Each writing rank writes and fsyncs its file, then reads it back for its CRC-32C.
  std::int64_t my_bytes = 0;
  std::uint32_t my_crc = 0;
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
      my_crc = file_crc32c(file);
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

  // 3. Every file's size and CRC-32C, for the manifest (a truncated or changed file is caught on resume):
  // [0, size) sizes, [size, 2 size) checksums.
  at::Tensor sums = at::zeros({2 * size}, at::TensorOptions().dtype(at::kLong));
  sums[rank] = my_bytes;
  sums[size + rank] = static_cast<std::int64_t>(my_crc);
  if (size > 1) {
    at::Tensor moved = sums.to(device);
    world.all_reduce(moved, dist::ReduceOp::sum);
    sums = moved.to(at::kCPU);
  }

  // 4. Rank 0: the manifest, the directory synced, the rename, the old checkpoints.
  Saved saved{target, 0};
  if (rank == 0) {
    try {
      nlohmann::json files = nlohmann::json::array();
      for (int r = 0; r < size; ++r) {
        const std::int64_t b = sums[r].item<std::int64_t>();
        const auto crc = static_cast<std::uint32_t>(sums[size + r].item<std::int64_t>());
        if (b > 0) files.push_back({{"name", rank_file_name(r)}, {"bytes", b}, {"crc32c", crc32c_hex(crc)}});
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
      if (keep_last > 0) {  // the newest keep_last by their manifests' steps, and always this one
        const auto all = complete_checkpoints(checkpoint_dir);
        for (std::size_t i = 0; i + static_cast<std::size_t>(keep_last) < all.size(); ++i)
          if (all[i].second.filename() != target.filename()) fs::remove_all(all[i].second, ec);
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
