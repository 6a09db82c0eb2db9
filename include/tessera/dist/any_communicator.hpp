#pragma once
// defines: AnyCommunicator and AnyWork, a Communicator (communicator.hpp) that holds any other one behind a
// virtual interface. The engine keeps its communicators in this form, so the same compiled engine runs over
// MPI (CPU tensors), NCCL (CUDA tensors) or SelfCommunicator (one process, no MPI), chosen at start-up by the
// job and the device; sharding policies never see which.
//
//   AnyCommunicator comm = AnyCommunicator::of(MpiCommunicator(world.comm()));
//   AnyWork w = comm.all_reduce_async(grads, ReduceOp::avg);  ... w.wait();
//
// Copies share the held communicator (it is one set of MPI/NCCL resources). Needs no MPI headers.
#include <ATen/core/Tensor.h>

#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include "tessera/dist/communicator.hpp"

namespace tessera::dist {

class AnyWork {
 public:
  AnyWork() = default;  // nothing to wait for
  // The exclusion comes first: checking WorkHandle<AnyWork> asks whether AnyWork is movable, which would consider
  // this constructor again (clang 14 recurses there; GCC stops).
  template <class W>
    requires(!std::same_as<std::remove_cvref_t<W>, AnyWork> && WorkHandle<W>)
  explicit AnyWork(W work) : impl_(std::make_unique<Impl<W>>(std::move(work))) {}

  void wait() {
    if (impl_) impl_->wait();
  }
  bool is_completed() { return !impl_ || impl_->is_completed(); }
  bool empty() const { return !impl_; }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual void wait() = 0;
    virtual bool is_completed() = 0;
  };
  template <class W>
  struct Impl final : Base {
    explicit Impl(W w) : work(std::move(w)) {}
    void wait() override { work.wait(); }
    bool is_completed() override { return work.is_completed(); }
    W work;
  };
  std::unique_ptr<Base> impl_;
};

class AnyCommunicator {
 public:
  using Work = AnyWork;

  AnyCommunicator() = default;  // empty: holds nothing; calls are a logic error
  template <class C>
    requires(!std::same_as<std::remove_cvref_t<C>, AnyCommunicator> && Communicator<C>)
  static AnyCommunicator of(C comm) {
    AnyCommunicator any;
    any.impl_ = std::make_shared<Impl<C>>(std::move(comm));
    return any;
  }

  bool empty() const { return !impl_; }
  int rank() const { return impl_->rank(); }
  int size() const { return impl_->size(); }

  void all_reduce(const at::Tensor& t, ReduceOp op) { impl_->all_reduce(t, op); }
  void all_reduce(std::span<const at::Tensor> ts, ReduceOp op) { impl_->all_reduce_many(ts, op); }
  void reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) { impl_->reduce_scatter(in, out, op); }
  void all_gather(const at::Tensor& in, const at::Tensor& out) { impl_->all_gather(in, out); }
  void broadcast(const at::Tensor& t, int root) { impl_->broadcast(t, root); }
  void barrier() { impl_->barrier(); }

  AnyWork all_reduce_async(const at::Tensor& t, ReduceOp op) { return impl_->all_reduce_async(t, op); }
  AnyWork all_reduce_async(std::span<const at::Tensor> ts, ReduceOp op) { return impl_->all_reduce_many_async(ts, op); }
  AnyWork reduce_scatter_async(const at::Tensor& in, const at::Tensor& out, ReduceOp op) {
    return impl_->reduce_scatter_async(in, out, op);
  }
  AnyWork all_gather_async(const at::Tensor& in, const at::Tensor& out) { return impl_->all_gather_async(in, out); }
  AnyWork broadcast_async(const at::Tensor& t, int root) { return impl_->broadcast_async(t, root); }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual void all_reduce(const at::Tensor&, ReduceOp) = 0;
    virtual void all_reduce_many(std::span<const at::Tensor>, ReduceOp) = 0;
    virtual void reduce_scatter(const at::Tensor&, const at::Tensor&, ReduceOp) = 0;
    virtual void all_gather(const at::Tensor&, const at::Tensor&) = 0;
    virtual void broadcast(const at::Tensor&, int) = 0;
    virtual void barrier() = 0;
    virtual AnyWork all_reduce_async(const at::Tensor&, ReduceOp) = 0;
    virtual AnyWork all_reduce_many_async(std::span<const at::Tensor>, ReduceOp) = 0;
    virtual AnyWork reduce_scatter_async(const at::Tensor&, const at::Tensor&, ReduceOp) = 0;
    virtual AnyWork all_gather_async(const at::Tensor&, const at::Tensor&) = 0;
    virtual AnyWork broadcast_async(const at::Tensor&, int) = 0;
  };
  template <class C>
  struct Impl final : Base {
    explicit Impl(C c) : comm(std::move(c)) {}
    int rank() const override { return comm.rank(); }
    int size() const override { return comm.size(); }
    void all_reduce(const at::Tensor& t, ReduceOp op) override { comm.all_reduce(t, op); }
    void all_reduce_many(std::span<const at::Tensor> ts, ReduceOp op) override { comm.all_reduce(ts, op); }
    void reduce_scatter(const at::Tensor& i, const at::Tensor& o, ReduceOp op) override { comm.reduce_scatter(i, o, op); }
    void all_gather(const at::Tensor& i, const at::Tensor& o) override { comm.all_gather(i, o); }
    void broadcast(const at::Tensor& t, int root) override { comm.broadcast(t, root); }
    void barrier() override { comm.barrier(); }
    AnyWork all_reduce_async(const at::Tensor& t, ReduceOp op) override { return AnyWork(comm.all_reduce_async(t, op)); }
    AnyWork all_reduce_many_async(std::span<const at::Tensor> ts, ReduceOp op) override {
      return AnyWork(comm.all_reduce_async(ts, op));
    }
    AnyWork reduce_scatter_async(const at::Tensor& i, const at::Tensor& o, ReduceOp op) override {
      return AnyWork(comm.reduce_scatter_async(i, o, op));
    }
    AnyWork all_gather_async(const at::Tensor& i, const at::Tensor& o) override {
      return AnyWork(comm.all_gather_async(i, o));
    }
    AnyWork broadcast_async(const at::Tensor& t, int root) override { return AnyWork(comm.broadcast_async(t, root)); }
    C comm;
  };
  std::shared_ptr<Base> impl_;
};

static_assert(Communicator<AnyCommunicator>);

}  // namespace tessera::dist
