#pragma once
// defines: ImmediateCollectives<C>, the *_async half of the Communicator concept (communicator.hpp) for a communicator
// whose collectives are finished when they return (SelfCommunicator, ShapeCommunicator): each *_async runs its blocking
// twin on C and returns a Work that is already complete.
#include <ATen/core/Tensor.h>

#include <span>

#include "tessera/dist/communicator.hpp"

namespace tessera::dist {

template <class C>
class ImmediateCollectives {
 public:
  struct Work {
    void wait() {}
    bool is_completed() { return true; }
  };

  Work all_reduce_async(const at::Tensor& t, ReduceOp op) { return self().all_reduce(t, op), Work{}; }
  Work all_reduce_async(std::span<const at::Tensor> ts, ReduceOp op) { return self().all_reduce(ts, op), Work{}; }
  Work reduce_scatter_async(const at::Tensor& in, const at::Tensor& out, ReduceOp op) {
    return self().reduce_scatter(in, out, op), Work{};
  }
  Work all_gather_async(const at::Tensor& in, const at::Tensor& out) { return self().all_gather(in, out), Work{}; }
  Work broadcast_async(const at::Tensor& t, int root) { return self().broadcast(t, root), Work{}; }

 private:
  C& self() { return static_cast<C&>(*this); }
};

}  // namespace tessera::dist
