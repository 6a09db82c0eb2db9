#pragma once
// defines: SelfCommunicator, the Communicator (communicator.hpp) of a group of one rank: every collective is
// the identity (all_gather and reduce_scatter copy their input to their output when they are different
// buffers). It lets the sharded engine run a world of one without MPI, with NoShard's results.
#include <ATen/core/Tensor.h>

#include <span>

#include "tessera/core/error.hpp"
#include "tessera/dist/communicator.hpp"

namespace tessera::dist {

class SelfCommunicator {
 public:
  struct Work {
    void wait() {}
    bool is_completed() { return true; }
  };

  int rank() const { return 0; }
  int size() const { return 1; }

  void all_reduce(const at::Tensor&, ReduceOp) {}
  void all_reduce(std::span<const at::Tensor>, ReduceOp) {}
  void reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp) { copy("reduce_scatter", in, out); }
  void all_gather(const at::Tensor& in, const at::Tensor& out) { copy("all_gather", in, out); }
  void broadcast(const at::Tensor&, int root) {
    if (root != 0) throw Error("broadcast: root " + std::to_string(root) + " is not a rank of a group of one");
  }
  void barrier() {}

  Work all_reduce_async(const at::Tensor& t, ReduceOp op) { return all_reduce(t, op), Work{}; }
  Work all_reduce_async(std::span<const at::Tensor> ts, ReduceOp op) { return all_reduce(ts, op), Work{}; }
  Work reduce_scatter_async(const at::Tensor& in, const at::Tensor& out, ReduceOp op) {
    return reduce_scatter(in, out, op), Work{};
  }
  Work all_gather_async(const at::Tensor& in, const at::Tensor& out) { return all_gather(in, out), Work{}; }
  Work broadcast_async(const at::Tensor& t, int root) { return broadcast(t, root), Work{}; }

 private:
  static void copy(const char* what, const at::Tensor& in, const at::Tensor& out) {
    if (in.numel() != out.numel())
      throw Error(std::string(what) + ": a group of one needs equal element counts (input " +
                  std::to_string(in.numel()) + ", output " + std::to_string(out.numel()) + ")");
    if (in.data_ptr() != out.data_ptr()) out.copy_(in);
  }
};

static_assert(Communicator<SelfCommunicator>);

}  // namespace tessera::dist
