#pragma once
// defines: ReduceOp, the WorkHandle and Communicator concepts: what sharding policies ask of the job's
// collectives. Policies never call MPI or NCCL themselves; MpiCommunicator (CPU tensors, mpi_communicator.hpp)
// models Communicator today, an NCCL one (CUDA tensors, stream-ordered Work) will model it later.
//
// Every rank of the group calls every collective, in the same order, with the same element counts and dtypes.
// Tensors are contiguous. Supported dtypes: float32, float64, bfloat16, float16, int64, int32. Notation:
// W = size() (ranks in the group), r = rank(), n = an element count. Output tensors are written through a
// `const at::Tensor&` (the handle is const, not the storage), so views such as `flat.narrow(0, off, n)` pass.
//
//   all_reduce(t, op)            t: n elements, in place; afterwards every rank holds op over the W inputs.
//   reduce_scatter(in, out, op)  in: W*n elements, out: n elements; rank r receives op over the W inputs of
//                                in[r*n, (r+1)*n) (the flat block r). Same dtype and device for in and out.
//   all_gather(in, out)          in: n elements, out: W*n elements; out[q*n, (q+1)*n) = rank q's in.
//                                in may be out's own block r (the sharded-parameter layout): no copy then.
//   broadcast(t, root)           t: n elements, in place; afterwards every rank holds root's t.
//   all_reduce(tensors, op)      the coalesced form: one collective per dtype present in the list (the tensors
//                                of one dtype are packed into one flat buffer, reduced, unpacked).
//   barrier()                    returns once every rank has called it.
//
// ReduceOp::avg is sum / W, computed after the sum; int64/int32 refuse avg (it would truncate). How bfloat16
// and float16 sums are accumulated is the implementation's to say (MpiCommunicator: in float32, rounded once).
// all_gather and broadcast move every dtype bit for bit.
//
// Each collective has an *_async twin with the same arguments that starts it and returns a Work. The
// tensors then belong to the collective until Work::wait() returns: do not read or write them before.
// wait() blocks until the collective finished on this rank and writes the result (rounding, unpacking,
// averaging) into the caller's tensors; is_completed() asks without blocking (and finishes the same way when
// it says true). A Work that is destroyed without wait() waits in its destructor.
//
// Bad arguments and MPI failures throw tessera::Error. A rank that throws skips the collective its peers are
// in, and they wait for it: a multi-rank program ends the job then (World::abort, world.hpp).
#include <ATen/core/Tensor.h>

#include <concepts>
#include <span>

namespace tessera::dist {

enum class ReduceOp { sum, avg, max };

template <class W>
concept WorkHandle = std::movable<W> && requires(W& w) {
  { w.wait() } -> std::same_as<void>;
  { w.is_completed() } -> std::same_as<bool>;
};

template <class C>
concept Communicator = requires(C& c, const C& cc, const at::Tensor& t, std::span<const at::Tensor> ts,
                                ReduceOp op, int root) {
  typename C::Work;
  requires WorkHandle<typename C::Work>;
  { cc.rank() } -> std::same_as<int>;
  { cc.size() } -> std::same_as<int>;

  { c.all_reduce(t, op) } -> std::same_as<void>;
  { c.all_reduce(ts, op) } -> std::same_as<void>;
  { c.reduce_scatter(t, t, op) } -> std::same_as<void>;
  { c.all_gather(t, t) } -> std::same_as<void>;
  { c.broadcast(t, root) } -> std::same_as<void>;
  { c.barrier() } -> std::same_as<void>;

  { c.all_reduce_async(t, op) } -> std::same_as<typename C::Work>;
  { c.all_reduce_async(ts, op) } -> std::same_as<typename C::Work>;
  { c.reduce_scatter_async(t, t, op) } -> std::same_as<typename C::Work>;
  { c.all_gather_async(t, t) } -> std::same_as<typename C::Work>;
  { c.broadcast_async(t, root) } -> std::same_as<typename C::Work>;
};

}  // namespace tessera::dist
