#pragma once
// defines: ShapeCommunicator and CollectiveBytes. The Communicator (communicator.hpp) of one simulated rank in a
// dry run (predict/dry_run.hpp): it moves no data (its tensors are meta tensors, which hold none) but checks the
// element counts as a real group would and adds up the bytes each kind of collective was handed, so a dry step
// reports its communication volume. rank() and size() are the simulated rank's place in the group.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/dist/communicator.hpp"
#include "tessera/dist/immediate_collectives.hpp"

namespace tessera::dist {

// Bytes handed to collectives, per kind: all_reduce counts its buffer, all_gather and reduce_scatter the full
// (W-block) buffer, broadcast its buffer; ops counts calls.
struct CollectiveBytes {
  std::int64_t all_reduce = 0, all_gather = 0, reduce_scatter = 0, broadcast = 0, ops = 0;
  // The bytes this rank sends over its links if each collective runs as a ring over its group of W ranks:
  // all_reduce 2(W-1)/W of its buffer, all_gather and reduce_scatter (W-1)/W of the full buffer, broadcast its
  // buffer (nothing in a group of one).
  double ring = 0;
};

class ShapeCommunicator : public ImmediateCollectives<ShapeCommunicator> {
 public:

  ShapeCommunicator(int rank, int size, std::shared_ptr<CollectiveBytes> bytes)
      : rank_(rank), size_(size), bytes_(std::move(bytes)) {}

  int rank() const { return rank_; }
  int size() const { return size_; }

  void all_reduce(const at::Tensor& t, ReduceOp) { add(bytes_->all_reduce, t.nbytes(), 2 * share()); }
  void all_reduce(std::span<const at::Tensor> ts, ReduceOp) {
    for (const at::Tensor& t : ts) add(bytes_->all_reduce, t.nbytes(), 2 * share());
  }
  void reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp) {
    check("reduce_scatter", in.numel(), out.numel());
    add(bytes_->reduce_scatter, in.nbytes(), share());
  }
  void all_gather(const at::Tensor& in, const at::Tensor& out) {
    check("all_gather", out.numel(), in.numel());
    add(bytes_->all_gather, out.nbytes(), share());
  }
  void broadcast(const at::Tensor& t, int) { add(bytes_->broadcast, t.nbytes(), size_ > 1 ? 1.0 : 0.0); }
  void barrier() {}

 private:
  double share() const { return double(size_ - 1) / double(size_); }
  void add(std::int64_t& kind, std::size_t nbytes, double ring_factor) {
    kind += static_cast<std::int64_t>(nbytes);
    bytes_->ring += ring_factor * double(nbytes);
    ++bytes_->ops;
  }
  // full = size() x block, as every rank of a real group would require.
  void check(const char* what, std::int64_t full, std::int64_t block) const {
    if (full != block * size_)
      throw Error(std::string(what) + ": " + std::to_string(full) + " elements is not " + std::to_string(size_) +
                  " x " + std::to_string(block));
  }

  int rank_, size_;
  std::shared_ptr<CollectiveBytes> bytes_;
};

static_assert(Communicator<ShapeCommunicator>);

}  // namespace tessera::dist
