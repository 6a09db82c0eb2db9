#pragma once
// defines: MpiCommunicator, the Communicator (communicator.hpp) over an MPI communicator, for CPU tensors;
// MpiWork, its async handle; detail::OwnedComm and detail::check_mpi, shared with world.hpp.
//
// CPU tensors of float32/float64/int64/int32 are handed to MPI as they are (no copy). MPI has no bfloat16 or
// float16 datatype, so their reductions (all_reduce, reduce_scatter) up-cast into a float32 temporary, reduce
// that, and round back once when the Work finishes: more accurate than summing in 16 bits, for 2x the wire
// bytes and a float32 copy of the buffer. all_gather and broadcast move 16-bit values as raw uint16.
// CUDA tensors are staged through host memory: copied to a CPU tensor, communicated, copied back (correct
// but slow; the NCCL communicator is the fast path for them).
//
// MPI counts are int. all_reduce and broadcast cut longer buffers into calls of at most max_count_per_call
// elements; reduce_scatter and all_gather refuse a per-rank block longer than that (tessera::Error saying
// how to split the buffer).
#if !__has_include(<mpi.h>)
#error "tessera/dist needs MPI's mpi.h: install libopenmpi-dev (Debian) and link tessera::tessera, whose CMake package adds MPI when it finds it"
#endif
// tessera calls MPI's C API: leave out the MPI-2 C++ bindings (removed in MPI-3), which cost compile time and
// trip -Wextra (cast-function-type) when mpi.h is found through -I rather than -isystem.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dist/communicator.hpp"

namespace tessera::dist {

namespace detail {

// Throws tessera::Error naming `call` and MPI's own error text unless rc is MPI_SUCCESS.
void check_mpi(int rc, std::string_view call);

// Owns an MPI communicator: MPI_Comm_free on destruction (skipped once MPI is finalized). Move-only.
class OwnedComm {
 public:
  OwnedComm() = default;
  explicit OwnedComm(MPI_Comm comm) noexcept : comm_(comm) {}
  OwnedComm(OwnedComm&& other) noexcept;
  OwnedComm& operator=(OwnedComm&& other) noexcept;
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  ~OwnedComm();

  MPI_Comm get() const noexcept { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace detail

// One started collective: its MPI requests and the write-back that runs once they complete (rounding
// 16-bit results, averaging, unpacking coalesced buffers, copying host-staged results to the device).
// It holds every buffer the collective uses, so they live until it is done. Move-only.
class MpiWork {
 public:
  MpiWork(MpiWork&& other) noexcept;
  MpiWork& operator=(MpiWork&& other);
  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;
  // Waits if still pending; a failure there cannot be thrown from a destructor, so it is printed and the
  // process terminates (the ranks would otherwise go on with different data).
  ~MpiWork();

  // Blocks until the collective completed on this rank (MPI_Waitall), then writes the results. Idempotent.
  void wait();
  // MPI_Testall: true (after writing the results) when complete. Calling it also drives MPI's progress.
  bool is_completed();

 private:
  friend class MpiCommunicator;
  explicit MpiWork(std::string what) : what_(std::move(what)) {}
  bool pending() const { return !requests_.empty() || !finish_.empty(); }
  void run_finish();

  std::string what_;                          // "all_reduce", ...: for error messages and the watchdog
  std::int64_t bytes_ = 0;                    // the bytes it moves, for the watchdog's message
  std::vector<MPI_Request> requests_;         // outstanding nonblocking calls
  std::vector<std::function<void()>> finish_;  // write-back steps, run in order after the requests
};

class MpiCommunicator {
 public:
  using Work = MpiWork;
  static constexpr std::int64_t max_mpi_count = std::numeric_limits<int>::max();

  // Duplicates `comm` (MPI_Comm_dup: collective over comm), so tessera's messages never match the caller's,
  // and makes MPI errors on the duplicate return codes instead of aborting. max_count_per_call: the most
  // elements one MPI call moves (1 .. 2^31-1); tests lower it to exercise the chunked path.
  explicit MpiCommunicator(MPI_Comm comm, std::int64_t max_count_per_call = max_mpi_count);
  // Takes ownership of `comm` (World::split hands over the communicator it has just made).
  explicit MpiCommunicator(detail::OwnedComm comm, std::int64_t max_count_per_call = max_mpi_count);

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_.get(); }

  // Shapes and element counts: communicator.hpp.
  void all_reduce(const at::Tensor& tensor, ReduceOp op);
  void all_reduce(std::span<const at::Tensor> tensors, ReduceOp op);
  void reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op);
  void all_gather(const at::Tensor& input, const at::Tensor& output);
  void broadcast(const at::Tensor& tensor, int root);
  void barrier();

  [[nodiscard]] MpiWork all_reduce_async(const at::Tensor& tensor, ReduceOp op);
  [[nodiscard]] MpiWork all_reduce_async(std::span<const at::Tensor> tensors, ReduceOp op);
  [[nodiscard]] MpiWork reduce_scatter_async(const at::Tensor& input, const at::Tensor& output, ReduceOp op);
  [[nodiscard]] MpiWork all_gather_async(const at::Tensor& input, const at::Tensor& output);
  [[nodiscard]] MpiWork broadcast_async(const at::Tensor& tensor, int root);

 private:
  // blocking: the MPI_Allreduce family, results written before start_* returns (the Work only finishes the
  // write-back); nonblocking: the MPI_Iallreduce family, requests kept in the Work.
  enum class Mode { blocking, nonblocking };

  MpiWork start_all_reduce(const at::Tensor& tensor, ReduceOp op, Mode mode);
  MpiWork start_all_reduce(std::span<const at::Tensor> tensors, ReduceOp op, Mode mode);
  MpiWork start_reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op, Mode mode);
  MpiWork start_all_gather(const at::Tensor& input, const at::Tensor& output, Mode mode);
  MpiWork start_broadcast(const at::Tensor& tensor, int root, Mode mode);
  // In-place all-reduce of a CPU buffer MPI can reduce, cut into calls of at most max_count_ elements.
  void reduce_chunks(MpiWork& work, const at::Tensor& buffer, ReduceOp op, Mode mode);
  // Refuses a per-rank block longer than max_count_ (reduce_scatter, all_gather cannot be cut).
  int block_count(std::string_view what, std::int64_t elements) const;

  detail::OwnedComm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::int64_t max_count_ = max_mpi_count;
};

static_assert(Communicator<MpiCommunicator>);

}  // namespace tessera::dist
