#pragma once
// defines: SelfCommunicator, the Communicator (communicator.hpp) of a group of one rank: every collective is
// the identity (all_gather and reduce_scatter copy their input to their output when they are different
// buffers). It lets the sharded engine run a world of one without MPI, with NoShard's results.
#include <ATen/core/Tensor.h>

#include <span>

#include "tessera/core/error.hpp"
#include "tessera/dist/communicator.hpp"
#include "tessera/dist/immediate_collectives.hpp"

namespace tessera::dist {

class SelfCommunicator : public ImmediateCollectives<SelfCommunicator> {
 public:

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
