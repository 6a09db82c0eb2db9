#pragma once
// defines: TracedCommunicator, a Communicator (communicator.hpp) over another that reports every collective to a
// sink (its kind, its bytes, when it ran) and changes nothing else; CollectiveKind, CollectiveSink. The engine
// traces through it when a run has trace= (report/timeline.hpp). A blocking collective runs from the call to its
// return; a nonblocking one from its issue to the first wait() or is_completed() that finds it done. Bytes: the
// tensor an all-reduce or broadcast works on (all of them for a list), an all-gather's output, a reduce-scatter's
// input: the whole buffer the group reduces or assembles.
//
//   AnyCommunicator traced = AnyCommunicator::of(TracedCommunicator(comm, sink));
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>

#include "tessera/dist/any_communicator.hpp"

namespace tessera::dist {

enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, broadcast, barrier };

using CollectiveClock = std::chrono::steady_clock;
using CollectiveSink = std::function<void(CollectiveKind kind, std::int64_t bytes, CollectiveClock::time_point begin,
                                          CollectiveClock::time_point end)>;

class TracedWork {
 public:
  TracedWork(AnyWork inner, std::shared_ptr<const CollectiveSink> sink, CollectiveKind kind, std::int64_t bytes)
      : inner_(std::move(inner)), sink_(std::move(sink)), kind_(kind), bytes_(bytes), begin_(CollectiveClock::now()) {}
  TracedWork(TracedWork&&) noexcept = default;
  TracedWork& operator=(TracedWork&&) noexcept = default;
  TracedWork(const TracedWork&) = delete;
  TracedWork& operator=(const TracedWork&) = delete;
  ~TracedWork() = default;

  void wait() {
    inner_.wait();
    report();
  }
  bool is_completed() {
    const bool done = inner_.is_completed();
    if (done) report();
    return done;
  }

 private:
  void report() {
    if (sink_ && !reported_) (*sink_)(kind_, bytes_, begin_, CollectiveClock::now());
    reported_ = true;
  }
  AnyWork inner_;
  std::shared_ptr<const CollectiveSink> sink_;
  CollectiveKind kind_;
  std::int64_t bytes_;
  CollectiveClock::time_point begin_;
  bool reported_ = false;
};

class TracedCommunicator {
 public:
  using Work = TracedWork;

  TracedCommunicator(AnyCommunicator inner, CollectiveSink sink)
      : inner_(std::move(inner)), sink_(std::make_shared<const CollectiveSink>(std::move(sink))) {}

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }

  void all_reduce(const at::Tensor& t, ReduceOp op) {
    timed(CollectiveKind::all_reduce, bytes_of(t), [&] { inner_.all_reduce(t, op); });
  }
  void all_reduce(std::span<const at::Tensor> ts, ReduceOp op) {
    timed(CollectiveKind::all_reduce, bytes_of(ts), [&] { inner_.all_reduce(ts, op); });
  }
  void reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) {
    timed(CollectiveKind::reduce_scatter, bytes_of(in), [&] { inner_.reduce_scatter(in, out, op); });
  }
  void all_gather(const at::Tensor& in, const at::Tensor& out) {
    timed(CollectiveKind::all_gather, bytes_of(out), [&] { inner_.all_gather(in, out); });
  }
  void broadcast(const at::Tensor& t, int root) {
    timed(CollectiveKind::broadcast, bytes_of(t), [&] { inner_.broadcast(t, root); });
  }
  void barrier() {
    timed(CollectiveKind::barrier, 0, [&] { inner_.barrier(); });
  }

  TracedWork all_reduce_async(const at::Tensor& t, ReduceOp op) {
    return TracedWork(inner_.all_reduce_async(t, op), sink_, CollectiveKind::all_reduce, bytes_of(t));
  }
  TracedWork all_reduce_async(std::span<const at::Tensor> ts, ReduceOp op) {
    return TracedWork(inner_.all_reduce_async(ts, op), sink_, CollectiveKind::all_reduce, bytes_of(ts));
  }
  TracedWork reduce_scatter_async(const at::Tensor& in, const at::Tensor& out, ReduceOp op) {
    return TracedWork(inner_.reduce_scatter_async(in, out, op), sink_, CollectiveKind::reduce_scatter, bytes_of(in));
  }
  TracedWork all_gather_async(const at::Tensor& in, const at::Tensor& out) {
    return TracedWork(inner_.all_gather_async(in, out), sink_, CollectiveKind::all_gather, bytes_of(out));
  }
  TracedWork broadcast_async(const at::Tensor& t, int root) {
    return TracedWork(inner_.broadcast_async(t, root), sink_, CollectiveKind::broadcast, bytes_of(t));
  }

 private:
  static std::int64_t bytes_of(const at::Tensor& t) {
    return t.defined() ? t.numel() * static_cast<std::int64_t>(t.element_size()) : 0;
  }
  static std::int64_t bytes_of(std::span<const at::Tensor> ts) {
    std::int64_t n = 0;
    for (const at::Tensor& t : ts) n += bytes_of(t);
    return n;
  }
  template <class F>
  void timed(CollectiveKind kind, std::int64_t bytes, F&& run) {
    const auto begin = CollectiveClock::now();
    run();
    (*sink_)(kind, bytes, begin, CollectiveClock::now());
  }

  AnyCommunicator inner_;
  std::shared_ptr<const CollectiveSink> sink_;
};

static_assert(Communicator<TracedCommunicator>);

}  // namespace tessera::dist
