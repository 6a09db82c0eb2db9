// implements: the counting meta allocator (memory/counting_meta_allocator.hpp) and the tags of what held its peak.
#include "tessera/memory/counting_meta_allocator.hpp"

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "tessera/core/error.hpp"

namespace tessera::memory {
namespace {

// ---- what is running: the operators RecordFunction announces on this thread ----

struct Running {
  std::string name;
  bool node = false;  // an autograd node (RecordScope::BACKWARD_FUNCTION), not an operator
};
thread_local std::vector<Running> running;

// "torch::autograd::CppNode<tessera::ops::(anonymous namespace)::WidenedLinear>" -> "WidenedLinear".
std::string short_node_name(std::string_view name) {
  constexpr std::string_view cpp_node = "torch::autograd::CppNode<";
  if (name.substr(0, cpp_node.size()) == cpp_node && name.back() == '>') {
    name = name.substr(cpp_node.size(), name.size() - cpp_node.size() - 1);
    if (const auto colon = name.rfind("::"); colon != std::string_view::npos) name = name.substr(colon + 2);
  }
  return std::string(name);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const bool node = fn.scope() == at::RecordScope::BACKWARD_FUNCTION;
  running.push_back({node ? short_node_name(fn.name()) : std::string(fn.name()), node});
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (!running.empty()) running.pop_back();
}

// The innermost operator, and the innermost autograd node around it: "aten::mm in MmBackward0".
std::string running_tag() {
  if (running.empty()) return "(no operator)";
  const Running& op = running.back();
  if (op.node) return op.name;
  for (auto it = running.rbegin(); it != running.rend(); ++it)
    if (it->node) return op.name + " in " + it->name;
  return op.name;
}

// ---- the allocator ----

// The storage of a meta tensor has no data: the DataPtr's data is null and its context records the counted size
// (and its tag, while tagging), which the deleter gives back.
class CountingMetaAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const std::int64_t r = rounding_.load();
    const std::int64_t n = (static_cast<std::int64_t>(bytes) + r - 1) / r * r;
    auto* record = new Record{this, n, -1};
    if (tagging_.load()) {
      std::lock_guard lock(tags_mutex_);
      record->tag = tag_index(running_tag(), n);
      record->generation = generation_;
      live_[record->tag].bytes += n;
      live_[record->tag].tensors += 1;
      if (allocated_.load() + n > peak_.load()) {
        peak_tags_ = live_;
        peak_tag_ = record->tag;
      }
    }
    live_storages_.fetch_add(1);
    const std::int64_t now = allocated_.fetch_add(n) + n;
    std::int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    return {nullptr, record, &release, c10::Device(c10::DeviceType::Meta)};
  }
  void copy_data(void*, const void*, std::size_t) const override {}  // meta tensors hold no values

  void reset_peak() {
    std::lock_guard lock(tags_mutex_);
    peak_.store(allocated_.load());
    peak_tags_ = live_;
    peak_tag_ = -1;
  }
  void set_rounding(std::int64_t bytes) { rounding_.store(bytes < 1 ? 1 : bytes); }
  AllocatorStats stats() const {
    const std::int64_t a = allocated_.load();
    return {a, peak_.load(), a};
  }

  void start_tagging() {
    std::lock_guard lock(tags_mutex_);
    if (tagging_.load()) throw Error("a MetaPeakTagging is already alive; one at a time");
    slots_.assign({{"(before)", 0}});
    index_.clear();
    live_.assign(1, Held{allocated_.load(), live_storages_.load()});  // what is live already: untagged
    peak_tags_ = live_;
    peak_tag_ = -1;
    ++generation_;
    tagging_.store(true);
  }
  void stop_tagging() { tagging_.store(false); }

  PeakHolders at_peak() const {
    std::lock_guard lock(tags_mutex_);
    PeakHolders out;
    for (std::size_t i = 0; i < peak_tags_.size(); ++i)
      if (peak_tags_[i].bytes > 0)
        out.holders.push_back({slots_[i].first, slots_[i].second, peak_tags_[i].bytes, peak_tags_[i].tensors});
    std::sort(out.holders.begin(), out.holders.end(), [](const PeakHolder& a, const PeakHolder& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.made_by < b.made_by;
    });
    if (peak_tag_ >= 0) out.reached_in = slots_[static_cast<std::size_t>(peak_tag_)].first;
    return out;
  }

 private:
  struct Held {
    std::int64_t bytes = 0;
    std::int64_t tensors = 0;
  };
  struct Record {
    CountingMetaAllocator* owner;
    std::int64_t bytes;
    std::int64_t tag;  // -1: allocated while not tagging
    std::uint64_t generation = 0;
  };
  static void release(void* ctx) {
    auto* r = static_cast<Record*>(ctx);
    CountingMetaAllocator* self = r->owner;
    if (self->tagging_.load()) {
      std::lock_guard lock(self->tags_mutex_);
      // A storage of this tagging gives back to its tag; an older one was counted in "(before)".
      Held& held = r->tag >= 0 && r->generation == self->generation_ ? self->live_[static_cast<std::size_t>(r->tag)]
                                                                     : self->live_[0];
      held.bytes -= r->bytes;
      held.tensors -= 1;
    }
    self->live_storages_.fetch_sub(1);
    self->allocated_.fetch_sub(r->bytes);
    delete r;
  }
  // The slot of storages of `bytes` made by `name`.
  std::int64_t tag_index(std::string name, std::int64_t bytes) {
    std::string key = name + '\0' + std::to_string(bytes);
    auto [it, fresh] = index_.emplace(std::move(key), static_cast<std::int64_t>(slots_.size()));
    if (fresh) {
      slots_.emplace_back(std::move(name), bytes);
      live_.emplace_back();
    }
    return it->second;
  }

  std::atomic<std::int64_t> allocated_{0}, peak_{0}, rounding_{1};
  std::atomic<std::int64_t> live_storages_{0};
  std::atomic<bool> tagging_{false};
  mutable std::mutex tags_mutex_;
  std::vector<std::pair<std::string, std::int64_t>> slots_;  // what made a slot's storages, and their size (0: any)
  std::unordered_map<std::string, std::int64_t> index_;
  std::vector<Held> live_, peak_tags_;
  std::int64_t peak_tag_ = -1;
  std::uint64_t generation_ = 0;  // a storage tagged by an earlier tagging is not subtracted from a later one's
};

CountingMetaAllocator* installed = nullptr;
std::once_flag install_once;

}  // namespace

void install_counting_meta_allocator() {
  std::call_once(install_once, [] {
    installed = new CountingMetaAllocator();  // leaked on purpose, as the CPU one
    c10::SetAllocator(c10::DeviceType::Meta, installed, /*priority=*/100);
  });
}

AllocatorStats meta_allocator_stats() {
  install_counting_meta_allocator();
  return installed->stats();
}

void reset_meta_peak() {
  install_counting_meta_allocator();
  installed->reset_peak();
}

void set_meta_rounding(std::int64_t bytes) {
  install_counting_meta_allocator();
  installed->set_rounding(bytes);
}

MetaPeakTagging::MetaPeakTagging() {
  install_counting_meta_allocator();
  installed->start_tagging();
  callback_ = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                        .needsInputs(false)
                                        .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

MetaPeakTagging::~MetaPeakTagging() {
  at::removeCallback(callback_);
  installed->stop_tagging();
  running.clear();
}

PeakHolders MetaPeakTagging::at_peak() const { return installed->at_peak(); }

}  // namespace tessera::memory
