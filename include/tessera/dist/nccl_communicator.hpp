#pragma once
// defines: NcclCommunicator, the Communicator (communicator.hpp) over NCCL, for CUDA tensors on one device;
// NcclWork, its async handle.
//
// One NcclCommunicator per rank and GPU, made collectively over an MPI communicator (rank 0 makes NCCL's
// unique id, MPI_Bcast hands it to the others). Typically:
//   tessera::dist::World world;
//   tessera::dist::NcclCommunicator comm(world.comm(), world.local_rank());
// NCCL refuses two ranks of one communicator on the same GPU.
//
// Streams. Collectives run on a non-blocking CUDA stream the communicator owns (the comm stream), ordered
// against the compute stream given at construction: by default the legacy default stream (nullptr), which
// is LibTorch's current stream unless the program set another one; a program that runs its model on its
// own stream passes that (at::cuda::getCurrentCUDAStream().stream()). Each collective records an event on
// the compute stream and makes the comm stream wait on it (so it sees every kernel queued before it), then
// launches NCCL on the comm stream and records an end event there. The host never blocks in a collective:
//   wait()          makes the compute stream wait on the end event (cudaStreamWaitEvent): kernels queued on
//                   the compute stream afterwards see the result. It does not block the host; read results on
//                   the host through LibTorch (t.cpu(), .item()), which synchronizes the compute stream.
//   is_completed()  true once the collective has finished on the GPU (cudaEventQuery).
// The blocking collectives are the async ones plus wait(): stream-ordered, not host-synchronous. barrier()
// alone blocks the host, until the comm stream is idle. Tensors must be produced and consumed on the compute
// stream (the Work holds them until wait(), then releases them with the compute stream already ordered
// after the collective, so LibTorch's caching allocator may reuse their memory safely).
//
// Every collective runs with this communicator's device current (switched for the call if the caller's
// current device differs, then switched back); the constructor leaves device_index current.
//
// dtypes: float32, float64, bfloat16, float16, int64, int32, handed to NCCL as they are (no copy, no
// staging). bfloat16 and float16 are reduced by NCCL in their own precision (each hop of the ring rounds),
// unlike MpiCommunicator's float32 accumulation. avg is ncclAvg (int64/int32 refuse it, as communicator.hpp
// says); max is ncclMax. Element counts are size_t: no per-call limit, nothing is cut into chunks.
// The coalesced all_reduce issues one ncclAllReduce per tensor inside ncclGroupStart/ncclGroupEnd (NCCL
// fuses them into one launch); nothing is packed.
//
// Not thread-safe: one thread starts and waits on the collectives of a communicator. Bad arguments and
// NCCL/CUDA failures throw tessera::Error naming the call and NCCL's or CUDA's error text; after an NCCL
// failure the destructor aborts the NCCL communicator (ncclCommAbort) instead of destroying it in order.
#if !__has_include(<nccl.h>) || !__has_include(<cuda_runtime_api.h>)
#error "tessera/dist/nccl_communicator.hpp needs NCCL's nccl.h and CUDA's cuda_runtime_api.h: install NCCL / CUDA toolkit, build with TESSERA_WITH_NCCL (cmake/TesseraNccl.cmake) and link tessera::tessera"
#endif
#include <cuda_runtime_api.h>
#include <nccl.h>

#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < 21000  // 2.10.0 (NCCL_VERSION(2, 10, 0))
#error "tessera/dist/nccl_communicator.hpp needs NCCL 2.10 or newer (ncclAvg); install a newer NCCL"
#endif

#include <ATen/core/Tensor.h>

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/dist/communicator.hpp"
#include "tessera/dist/mpi_communicator.hpp"  // <mpi.h> (MPI_Comm) and detail::check_mpi

namespace tessera::dist {

// One started collective: the end event on the comm stream, the compute stream to order after it, the
// tensors it uses (held until wait()) and any write-back to run then. Move-only.
class NcclWork {
 public:
  NcclWork(NcclWork&& other) noexcept;
  NcclWork& operator=(NcclWork&& other);
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;
  // Waits if still pending; a failure there cannot be thrown from a destructor, so it is printed and the
  // process terminates (the ranks would otherwise go on with different data).
  ~NcclWork();

  // Orders the compute stream after the collective (no host block), runs the write-back, releases the
  // tensors. Idempotent.
  void wait();
  // cudaEventQuery on the end event: true (after the write-back) once the collective finished on the GPU.
  bool is_completed();

 private:
  friend class NcclCommunicator;
  NcclWork(std::string what, int device, cudaStream_t compute_stream)
      : what_(std::move(what)), device_(device), compute_stream_(compute_stream) {}
  bool pending() const { return done_ != nullptr || !finish_.empty() || !tensors_.empty(); }
  void finish();  // write-back, then release the tensors and the event

  std::string what_;                            // "all_reduce", ...: for error messages
  int device_ = -1;                             // the communicator's device (the legacy stream is per device)
  cudaStream_t compute_stream_ = nullptr;       // not owned
  cudaEvent_t done_ = nullptr;                  // owned: recorded on the comm stream after the NCCL call
  std::vector<at::Tensor> tensors_;             // every buffer the collective reads or writes
  std::vector<std::function<void()>> finish_;  // write-back steps, run in order after the collective
};

class NcclCommunicator {
 public:
  using Work = NcclWork;

  // Collective over `comm` (every rank of it calls it): rank 0 makes the NCCL unique id, MPI_Bcast sends it
  // to the others, each rank makes device_index its current device (cudaSetDevice) and joins the NCCL
  // communicator (ncclCommInitRank). compute_stream: the stream the tensors are produced and consumed on
  // (nullptr: the legacy default stream, LibTorch's default current stream); it must belong to device_index.
  NcclCommunicator(MPI_Comm comm, int device_index, cudaStream_t compute_stream = nullptr);
  NcclCommunicator(NcclCommunicator&& other) noexcept;
  NcclCommunicator& operator=(NcclCommunicator&& other) noexcept;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  // ncclCommDestroy after the comm stream drained (ncclCommAbort if an NCCL call failed), then the stream
  // and events. Started Works stay valid (they own their events).
  ~NcclCommunicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  ncclComm_t nccl_comm() const { return comm_; }
  cudaStream_t comm_stream() const { return stream_; }
  cudaStream_t compute_stream() const { return compute_stream_; }

  // Shapes and element counts: communicator.hpp. Stream-ordered (see above).
  void all_reduce(const at::Tensor& tensor, ReduceOp op);
  void all_reduce(std::span<const at::Tensor> tensors, ReduceOp op);
  void reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op);
  void all_gather(const at::Tensor& input, const at::Tensor& output);
  void broadcast(const at::Tensor& tensor, int root);
  // An all-reduce of a one-element device buffer, then cudaStreamSynchronize of the comm stream.
  void barrier();

  [[nodiscard]] NcclWork all_reduce_async(const at::Tensor& tensor, ReduceOp op);
  [[nodiscard]] NcclWork all_reduce_async(std::span<const at::Tensor> tensors, ReduceOp op);
  [[nodiscard]] NcclWork reduce_scatter_async(const at::Tensor& input, const at::Tensor& output, ReduceOp op);
  [[nodiscard]] NcclWork all_gather_async(const at::Tensor& input, const at::Tensor& output);
  [[nodiscard]] NcclWork broadcast_async(const at::Tensor& tensor, int root);

 private:
  // Orders the comm stream after the compute stream, runs calls() (the NCCL calls) on the comm stream,
  // records the Work's end event. `tensors` are held by the Work.
  NcclWork launch(std::string_view what, std::vector<at::Tensor> tensors, const std::function<void()>& calls);
  // Throws tessera::Error naming `call` and NCCL's text unless rc is ncclSuccess; remembers the failure.
  void check_nccl(ncclResult_t rc, std::string_view call);
  // Defined, contiguous, a dtype NCCL moves, a CUDA tensor on this communicator's device.
  void check_tensor(const at::Tensor& t, std::string_view what, std::string_view role) const;
  void release() noexcept;  // the destructor's work

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;          // owned comm stream (cudaStreamNonBlocking)
  cudaStream_t compute_stream_ = nullptr;  // not owned
  cudaEvent_t ready_ = nullptr;            // owned: recorded on the compute stream before each collective
  void* barrier_buffer_ = nullptr;         // owned: one int32 on the device, for barrier()
  int device_ = -1;
  int rank_ = 0;
  int size_ = 1;
  bool failed_ = false;  // an NCCL call failed: abort instead of destroy
};

static_assert(Communicator<NcclCommunicator>);

}  // namespace tessera::dist
