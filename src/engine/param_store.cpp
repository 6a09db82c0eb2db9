#include "tessera/engine/param_store.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include "tessera/core/error.hpp"
#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/io/checkpoint_dir.hpp"

namespace tessera {
namespace {

std::string shape_string(at::IntArrayRef shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Tensors some Hugging Face checkpoints carry that are not parameters (recomputed buffers).
bool is_known_buffer(std::string_view name) {
  constexpr std::string_view suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

// The name `s` is stored under in `dir`: its own, else the first alias present (its own when none is).
const std::string& stored_name(const ParamSpec& s, const io::CheckpointDir& dir) {
  if (dir.find(s.name)) return s.name;
  for (const std::string& alias : s.aliases)
    if (dir.find(alias)) return alias;
  return s.name;
}

}  // namespace

ParamStore::ParamStore(std::vector<ParamSpec> specs, c10::ScalarType dtype, c10::Device device, ShardLayout layout,
                       bool pin_memory, std::size_t num_units)
    : specs_(std::move(specs)), dtype_(dtype), device_(device), layout_(layout) {
  if (layout_.group_size < 1 || layout_.group_rank < 0 || layout_.group_rank >= layout_.group_size)
    throw Error("ParamStore: shard rank " + std::to_string(layout_.group_rank) + " of a group of " +
                std::to_string(layout_.group_size));
  std::size_t units = num_units;
  for (const auto& s : specs_) units = std::max(units, s.unit + 1);
  unit_numel_.assign(units, 0);
  unit_specs_.resize(units);
  offsets_.reserve(specs_.size());
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const auto& s = specs_[i];
    offsets_.push_back(unit_numel_[s.unit]);
    unit_numel_[s.unit] += s.numel();
    unit_specs_[s.unit].push_back(i);
  }
  const std::int64_t g = layout_.group_size;
  const auto options = at::TensorOptions().dtype(dtype_).device(device_).pinned_memory(pin_memory && device_.is_cpu());
  for (std::size_t u = 0; u < units; ++u) padded_numel_.push_back((unit_numel_[u] + g - 1) / g * g);
  for (std::size_t u = 0; u < units; ++u) {
    const std::int64_t numel = layout_.store_shards ? padded_numel_[u] / g : padded_numel_[u];
    try {
      // Zeros: the padding must stay zero (its gradients are zero, so every optimizer keeps it there).
      flats_.push_back(at::empty({numel}, options));  // filled by initialize() or load() (padding zeroed there)
    } catch (const std::exception&) {  // c10::Error from the allocator, or std::bad_alloc
      std::int64_t total = 0;
      for (std::size_t k = 0; k < units; ++k) total += layout_.store_shards ? padded_numel_[k] / g : padded_numel_[k];
      const auto bytes = [&](std::int64_t n) { return std::to_string(n * static_cast<std::int64_t>(c10::elementSize(dtype_))); };
      throw Error("out of memory on " + device_.str() + ": cannot allocate " + bytes(numel) + " bytes for unit " +
                  std::to_string(u) + " of the parameters (" + bytes(total) + " bytes in all, " + c10::toString(dtype_) +
                  "); use a smaller model, a sharding policy that splits the parameters (FullShard), OffloadParams, "
                  "or a device with more memory");
    }
  }
}

at::Tensor ParamStore::shard(std::size_t unit) const {
  if (layout_.store_shards) return flats_[unit];
  const std::int64_t s = shard_numel(unit);
  return flats_[unit].narrow(0, layout_.group_rank * s, s);
}

std::vector<ParamSegment> ParamStore::shard_segments(std::size_t unit) const {
  const std::int64_t s = shard_numel(unit);
  const std::int64_t begin = layout_.group_rank * s, end = begin + s;
  std::vector<ParamSegment> out;
  for (std::size_t i : unit_specs_[unit]) {
    const std::int64_t a = std::max(begin, offsets_[i]), b = std::min(end, offsets_[i] + specs_[i].numel());
    if (a < b) out.push_back(ParamSegment{a - begin, b - a, specs_[i].numel()});
  }
  return out;
}

std::span<const at::Tensor> ParamStore::full_units() const {
  if (layout_.store_shards)
    throw Error("ParamStore::full_units: this store holds parameter shards; gather the units first");
  return flats_;
}

std::vector<at::Tensor> ParamStore::unit_views(std::size_t unit, const at::Tensor& full) const {
  std::vector<at::Tensor> views;
  views.reserve(unit_specs_[unit].size());
  for (std::size_t i : unit_specs_[unit]) views.push_back(full.narrow(0, offsets_[i], specs_[i].numel()).view(specs_[i].shape));
  return views;
}

// Builds each unit's full buffer on the CPU in the store's dtype (fill writes every spec's values into
// its view), then keeps the part this rank stores.
template <class Fill>
void ParamStore::fill_units(Fill&& fill) {
  at::NoGradGuard no_grad;
  for (std::size_t u = 0; u < flats_.size(); ++u) {
    const std::int64_t padding = padded_numel_[u] - unit_numel_[u];
    if (!layout_.store_shards && flats_[u].device().is_cpu()) {  // written in place: one copy per tensor
      const std::vector<at::Tensor> views = unit_views(u, flats_[u]);
      for (std::size_t k = 0; k < views.size(); ++k) fill(unit_specs_[u][k], views[k]);
      if (padding > 0) flats_[u].narrow(0, unit_numel_[u], padding).zero_();
      continue;
    }
    // Shards, or a device store: the whole unit on the CPU first, then this rank's part of it.
    at::Tensor full = at::empty({padded_numel_[u]}, at::TensorOptions().dtype(dtype_));
    if (padding > 0) full.narrow(0, unit_numel_[u], padding).zero_();
    const std::vector<at::Tensor> views = unit_views(u, full);
    for (std::size_t k = 0; k < views.size(); ++k) fill(unit_specs_[u][k], views[k]);
    const std::int64_t s = shard_numel(u);
    flats_[u].copy_(layout_.store_shards ? full.narrow(0, layout_.group_rank * s, s) : full);
  }
}

void ParamStore::initialize(double std, std::uint64_t seed) {
  if (device_.is_meta()) return;  // a dry run: shapes only, nothing to draw
  // Drawn in spec order, which is unit order: the same stream as one generator over all parameters.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  fill_units([&](std::size_t i, const at::Tensor& view) {
    const auto& s = specs_[i];
    switch (s.init) {
      case ParamInit::ones: view.fill_(1.0); break;
      case ParamInit::zeros: view.zero_(); break;
      case ParamInit::normal: {  // the spec's own std (T5), else initializer_range
        const double sd = s.init_std > 0.0 ? s.init_std : std;
        view.copy_(at::empty(s.shape, at::kFloat).normal_(0.0, sd, gen));
        break;
      }
      case ParamInit::kaiming_uniform: {  // kaiming_uniform_(a=sqrt(5)): bound = 1/sqrt(fan_in)
        const double bound = 1.0 / std::sqrt(static_cast<double>(s.shape.back()));
        view.copy_(at::empty(s.shape, at::kFloat).uniform_(-bound, bound, gen));
        break;
      }
    }
  });
}

void ParamStore::check_loadable(std::span<const ParamSpec> specs, const io::CheckpointDir& dir) {
  const std::string where = dir.dir().string() + ": ";
  std::set<std::string> expected;
  for (const auto& s : specs) {
    expected.insert(s.name);
    expected.insert(s.aliases.begin(), s.aliases.end());
  }
  std::vector<std::string> unknown;
  for (const auto& name : dir.names())
    if (!expected.count(name) && !is_known_buffer(name)) unknown.push_back(name);
  if (!unknown.empty()) {
    std::string list;
    for (std::size_t i = 0; i < unknown.size() && i < 5; ++i) list += (i ? ", " : "") + unknown[i].substr(0, 120);
    throw FormatError(where + "checkpoint has " + std::to_string(unknown.size()) + " tensor(s) this model does not use (" +
                      list + (unknown.size() > 5 ? ", ..." : "") +
                      "); its config.json does not match its weights, or it is not a checkpoint of this model family");
  }
  for (const auto& s : specs) {
    const io::TensorInfo* info = dir.find(stored_name(s, dir));
    if (!info)
      throw FormatError(where + "checkpoint lacks tensor '" + s.name + "' (shape " + shape_string(s.shape) +
                        "); the directory is incomplete or its config.json describes another model");
    if (info->shape != s.shape)
      throw FormatError(where + "checkpoint tensor '" + s.name + "' has shape " + shape_string(info->shape) +
                        " but config.json implies " + shape_string(s.shape) +
                        "; config.json and the weights describe different models");
    const bool floating = info->dtype == io::StDType::F32 || info->dtype == io::StDType::BF16 ||
                          info->dtype == io::StDType::F16 || info->dtype == io::StDType::F64;
    if (!floating)
      throw FormatError(where + "checkpoint tensor '" + s.name + "' has dtype " + std::string(io::dtype_name(info->dtype)) +
                        "; parameters must be stored as F32, BF16, F16 or F64 (an integer or bool tensor is not a "
                        "weight, and quantized checkpoints are not read)");
  }
}

void ParamStore::load(const io::CheckpointDir& dir) {
  check_loadable(specs_, dir);
  if (device_.is_meta()) return;  // a dry run: the header is checked, no weight is read
  fill_units([&](std::size_t i, const at::Tensor& view) {
    const std::string& name = stored_name(specs_[i], dir);
    const at::Tensor loaded = tensor_from_bytes(*dir.find(name), dir.bytes(name));
    for (const std::string& alias : specs_[i].aliases)  // a tied copy must be a copy
      if (alias != name && dir.find(alias) &&
          !at::equal(tensor_from_bytes(*dir.find(alias), dir.bytes(alias)).to(loaded.scalar_type()), loaded))
        throw FormatError(dir.dir().string() + ": checkpoint tensors '" + name + "' and '" + alias +
                          "' differ, but this model ties them (one tensor); save the model with its embeddings tied, "
                          "or remove '" + alias + "'");
    if (const std::int64_t bad = loaded.numel() - at::isfinite(loaded).sum().item<std::int64_t>(); bad > 0)
      throw FormatError(dir.dir().string() + ": checkpoint tensor '" + specs_[i].name + "' holds " + std::to_string(bad) +
                        " NaN or Inf value(s); the weights are corrupt or come from a diverged run");
    view.copy_(loaded);
  });
}

void ParamStore::save(const std::filesystem::path& dir, std::span<const at::Tensor> full_units) const {
  if (full_units.size() != flats_.size())
    throw Error("ParamStore::save: " + std::to_string(full_units.size()) + " unit buffers for " +
                std::to_string(flats_.size()) + " units");
  std::vector<at::Tensor> host;
  std::vector<io::TensorView> views;
  host.reserve(specs_.size());
  for (std::size_t u = 0; u < flats_.size(); ++u) {
    const std::vector<at::Tensor> params = unit_views(u, full_units[u].detach());
    for (std::size_t k = 0; k < params.size(); ++k) {
      host.push_back(params[k].to(at::kCPU).to(dtype_).contiguous());
      views.push_back(tensor_view(specs_[unit_specs_[u][k]].name, host.back()));
    }
  }
  io::write_checkpoint_dir(dir, views);
}

std::int64_t ParamStore::param_bytes() const {
  std::int64_t n = 0;
  for (const auto& f : flats_) n += static_cast<std::int64_t>(f.nbytes());
  return n;
}

std::int64_t ParamStore::numel() const {
  std::int64_t n = 0;
  for (auto k : unit_numel_) n += k;
  return n;
}

}  // namespace tessera
