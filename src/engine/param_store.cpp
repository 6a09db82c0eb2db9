#include "tessera/engine/param_store.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
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

// Tensors some Hugging Face Llama checkpoints carry that are not parameters (recomputed buffers).
bool is_known_buffer(std::string_view name) {
  constexpr std::string_view suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

}  // namespace

ParamStore::ParamStore(std::vector<ParamSpec> specs, c10::ScalarType dtype, c10::Device device)
    : specs_(std::move(specs)), dtype_(dtype), device_(device) {
  std::size_t units = 0;
  for (const auto& s : specs_) units = std::max(units, s.unit + 1);
  std::vector<std::int64_t> unit_numel(units, 0);
  offsets_.reserve(specs_.size());
  for (const auto& s : specs_) {
    offsets_.push_back(static_cast<std::size_t>(unit_numel[s.unit]));
    unit_numel[s.unit] += s.numel();
  }
  const auto options = at::TensorOptions().dtype(dtype_).device(device_);
  for (std::size_t u = 0; u < units; ++u) flats_.push_back(at::empty({unit_numel[u]}, options));
  flat_grads_.resize(units);
  unit_params_.resize(units);
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const auto& s = specs_[i];
    at::Tensor view = flats_[s.unit].narrow(0, static_cast<std::int64_t>(offsets_[i]), s.numel()).view(s.shape);
    // detach(): a leaf that shares the flat buffer's storage; autograd sees it as an ordinary parameter.
    at::Tensor leaf = view.detach().requires_grad_(true);
    params_.push_back(leaf);
    unit_params_[s.unit].push_back(leaf);
  }
}

void ParamStore::initialize(double std, std::uint64_t seed) {
  at::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const auto& s = specs_[i];
    at::Tensor values = s.init == ParamInit::ones ? at::ones(s.shape, at::kFloat)
                                                  : at::empty(s.shape, at::kFloat).normal_(0.0, std, gen);
    params_[i].copy_(values);
  }
}

void ParamStore::load(const io::CheckpointDir& dir) {
  at::NoGradGuard no_grad;
  std::set<std::string> expected;
  for (const auto& s : specs_) expected.insert(s.name);
  std::vector<std::string> unknown;
  for (const auto& name : dir.names())
    if (!expected.count(name) && !is_known_buffer(name)) unknown.push_back(name);
  if (!unknown.empty()) {
    std::string list;
    for (std::size_t i = 0; i < unknown.size() && i < 5; ++i) list += (i ? ", " : "") + unknown[i];
    throw FormatError("checkpoint has " + std::to_string(unknown.size()) + " tensor(s) this model does not use (" +
                      list + (unknown.size() > 5 ? ", ..." : "") +
                      "); its config.json does not match its weights, or it is not a Llama checkpoint");
  }
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const auto& s = specs_[i];
    const io::TensorInfo* info = dir.find(s.name);
    if (!info)
      throw FormatError("checkpoint lacks tensor '" + s.name + "' (shape " + shape_string(s.shape) +
                        "); the directory is incomplete or its config.json describes another model");
    if (info->shape != s.shape)
      throw FormatError("checkpoint tensor '" + s.name + "' has shape " + shape_string(info->shape) +
                        " but config.json implies " + shape_string(s.shape));
    params_[i].copy_(tensor_from_bytes(*info, dir.bytes(s.name)));
  }
}

void ParamStore::save(const std::filesystem::path& dir) const {
  std::vector<at::Tensor> host;
  std::vector<io::TensorView> views;
  host.reserve(specs_.size());
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    host.push_back(params_[i].detach().to(at::kCPU).contiguous());
    views.push_back(tensor_view(specs_[i].name, host.back()));
  }
  io::write_checkpoint_dir(dir, views);
}

void ParamStore::allocate_grads() {
  for (std::size_t u = 0; u < flats_.size(); ++u) flat_grads_[u] = at::zeros_like(flats_[u]);
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const auto& s = specs_[i];
    params_[i].mutable_grad() =
        flat_grads_[s.unit].narrow(0, static_cast<std::int64_t>(offsets_[i]), s.numel()).view(s.shape);
  }
}

void ParamStore::release_grads() {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
  for (auto& g : flat_grads_) g = at::Tensor();
}

bool ParamStore::has_grads() const { return !flat_grads_.empty() && flat_grads_.front().defined(); }

std::int64_t ParamStore::param_bytes() const {
  std::int64_t n = 0;
  for (const auto& f : flats_) n += static_cast<std::int64_t>(f.nbytes());
  return n;
}

std::int64_t ParamStore::grad_bytes() const {
  std::int64_t n = 0;
  for (const auto& g : flat_grads_)
    if (g.defined()) n += static_cast<std::int64_t>(g.nbytes());
  return n;
}

std::int64_t ParamStore::numel() const {
  std::int64_t n = 0;
  for (const auto& f : flats_) n += f.numel();
  return n;
}

}  // namespace tessera
