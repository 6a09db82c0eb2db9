#include "tessera/dist/nccl_communicator.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <sstream>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/dist/watchdog.hpp"

namespace tessera::dist {

namespace {

// Throws tessera::Error naming `call` and CUDA's own error text unless rc is cudaSuccess.
void check_cuda(cudaError_t rc, std::string_view call) {
  if (rc == cudaSuccess) return;
  throw Error(std::string(call) + " failed with CUDA error " + std::to_string(static_cast<int>(rc)) + " " +
              cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")");
}

// Makes `device` current for its lifetime when it is not already, then switches back. It switches only when
// needed: cudaSetDevice makes the device's context, so switching back to a device the caller never used
// would cost that device a context.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) noexcept {
    rc_ = cudaGetDevice(&previous_);
    if (rc_ == cudaSuccess && previous_ != device) {
      rc_ = cudaSetDevice(device);
      switched_ = rc_ == cudaSuccess;
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() {
    if (switched_) static_cast<void>(cudaSetDevice(previous_));
  }
  cudaError_t status() const { return rc_; }

 private:
  cudaError_t rc_ = cudaSuccess;
  int previous_ = -1;
  bool switched_ = false;
};

std::string dtype_name(c10::ScalarType dtype) { return std::string(c10::toString(dtype)); }

std::optional<ncclDataType_t> nccl_type(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kBFloat16: return ncclBfloat16;
    case at::kHalf: return ncclFloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    default: return std::nullopt;
  }
}

// Checked by check_tensor before any call.
ncclDataType_t nccl_type_of(const at::Tensor& t) { return *nccl_type(t.scalar_type()); }

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  throw Error("NcclCommunicator: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

std::size_t count(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()); }

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << "sizes " << t.sizes() << ", dtype " << t.scalar_type() << ", device " << t.device();
  return out.str();
}

void check_reducible(c10::ScalarType dtype, ReduceOp op, std::string_view what) {
  if (op == ReduceOp::avg && c10::isIntegralType(dtype, /*includeBool=*/true))
    throw Error(std::string(what) + ": avg of " + dtype_name(dtype) +
                " values would truncate; reduce with sum and divide in a floating dtype");
}

void check_same_dtype(const at::Tensor& input, const at::Tensor& output, std::string_view what) {
  if (input.scalar_type() != output.scalar_type())
    throw Error(std::string(what) + ": input (" + describe(input) + ") and output (" + describe(output) +
                ") differ in dtype; give both the same");
}

bool overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || a.device() != b.device()) return false;
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

}  // namespace

// ---- NcclWork ----

NcclWork::NcclWork(NcclWork&& other) noexcept
    : what_(std::move(other.what_)),
      device_(other.device_),
      compute_stream_(other.compute_stream_),
      done_(std::exchange(other.done_, nullptr)),
      tensors_(std::exchange(other.tensors_, {})),
      finish_(std::exchange(other.finish_, {})) {}

NcclWork& NcclWork::operator=(NcclWork&& other) {
  if (this != &other) {
    wait();
    what_ = std::move(other.what_);
    device_ = other.device_;
    compute_stream_ = other.compute_stream_;
    done_ = std::exchange(other.done_, nullptr);
    tensors_ = std::exchange(other.tensors_, {});
    finish_ = std::exchange(other.finish_, {});
  }
  return *this;
}

NcclWork::~NcclWork() {
  if (!pending()) return;
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: %s was dropped without wait() and then failed: %s\n", what_.c_str(), e.what());
    std::terminate();
  }
}

void NcclWork::finish() {
  auto steps = std::exchange(finish_, {});
  for (auto& step : steps) step();
  tensors_.clear();  // the compute stream is ordered after the collective (or it has finished): reuse is safe
}

void NcclWork::wait() {
  if (done_ != nullptr) {
    cudaEvent_t done = std::exchange(done_, nullptr);
    cudaError_t rc = cudaSuccess;
    {
      DeviceGuard guard(device_);  // the legacy default stream (nullptr) is the current device's
      rc = guard.status();
      if (rc == cudaSuccess) rc = cudaStreamWaitEvent(compute_stream_, done, 0);
    }
    static_cast<void>(cudaEventDestroy(done));  // released once the recorded work completes
    if (rc != cudaSuccess) {
      finish_.clear();  // nothing valid to write back
      tensors_.clear();
      check_cuda(rc, "cudaStreamWaitEvent (" + what_ + ")");
    }
  }
  finish();
}

bool NcclWork::is_completed() {
  if (done_ != nullptr) {
    const cudaError_t rc = cudaEventQuery(done_);
    if (rc == cudaErrorNotReady) {
      static_cast<void>(cudaGetLastError());  // not an error: keep it from LibTorch's next launch check
      return false;
    }
    static_cast<void>(cudaEventDestroy(std::exchange(done_, nullptr)));
    if (rc != cudaSuccess) {
      finish_.clear();  // nothing valid to write back
      tensors_.clear();
      check_cuda(rc, "cudaEventQuery (" + what_ + ")");
    }
  }
  finish();
  return true;
}

// ---- NcclCommunicator ----

NcclCommunicator::NcclCommunicator(MPI_Comm comm, int device_index, cudaStream_t compute_stream)
    : compute_stream_(compute_stream), device_(device_index) {
  detail::check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  detail::check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");

  // Rank 0 makes the id; the broadcast carries whether that worked, so a failure there is reported on every
  // rank instead of leaving the others waiting in ncclCommInitRank.
  struct {
    ncclUniqueId id;
    int rc;
  } bootstrap{};
  const watchdog::Guard in_flight("NCCL communicator creation", 0);
  if (rank_ == 0) bootstrap.rc = static_cast<int>(ncclGetUniqueId(&bootstrap.id));
  detail::check_mpi(MPI_Bcast(&bootstrap, static_cast<int>(sizeof(bootstrap)), MPI_BYTE, 0, comm), "MPI_Bcast");
  if (bootstrap.rc != ncclSuccess)
    check_nccl(static_cast<ncclResult_t>(bootstrap.rc), rank_ == 0 ? "ncclGetUniqueId" : "ncclGetUniqueId (on rank 0)");

  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (device_index < 0 || device_index >= devices)
    throw Error("NcclCommunicator: device_index " + std::to_string(device_index) + " is not a CUDA device of rank " +
                std::to_string(rank_) + " (it sees " + std::to_string(devices) +
                ": 0 .. n-1 after CUDA_VISIBLE_DEVICES); pass World::local_rank() or a device it sees");
  try {
    check_cuda(cudaSetDevice(device_index), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check_cuda(cudaMalloc(&barrier_buffer_, sizeof(std::int32_t)), "cudaMalloc");
    check_cuda(cudaMemsetAsync(barrier_buffer_, 0, sizeof(std::int32_t), stream_), "cudaMemsetAsync");
    check_nccl(ncclCommInitRank(&comm_, size_, bootstrap.id, rank_), "ncclCommInitRank");
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::NcclCommunicator(NcclCommunicator&& other) noexcept
    : comm_(std::exchange(other.comm_, nullptr)),
      stream_(std::exchange(other.stream_, nullptr)),
      compute_stream_(other.compute_stream_),
      ready_(std::exchange(other.ready_, nullptr)),
      barrier_buffer_(std::exchange(other.barrier_buffer_, nullptr)),
      device_(other.device_),
      rank_(other.rank_),
      size_(other.size_),
      failed_(std::exchange(other.failed_, false)) {}

NcclCommunicator& NcclCommunicator::operator=(NcclCommunicator&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = std::exchange(other.comm_, nullptr);
    stream_ = std::exchange(other.stream_, nullptr);
    compute_stream_ = other.compute_stream_;
    ready_ = std::exchange(other.ready_, nullptr);
    barrier_buffer_ = std::exchange(other.barrier_buffer_, nullptr);
    device_ = other.device_;
    rank_ = other.rank_;
    size_ = other.size_;
    failed_ = std::exchange(other.failed_, false);
  }
  return *this;
}

NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() noexcept {
  if (comm_ == nullptr && stream_ == nullptr && ready_ == nullptr && barrier_buffer_ == nullptr) return;
  DeviceGuard guard(device_);
  if (comm_ != nullptr) {
    // Let started collectives finish first; after a failure they may never, so abort them instead.
    if (!failed_ && stream_ != nullptr && cudaStreamSynchronize(stream_) != cudaSuccess) failed_ = true;
    static_cast<void>(failed_ ? ncclCommAbort(comm_) : ncclCommDestroy(comm_));
    comm_ = nullptr;
  }
  if (ready_ != nullptr) static_cast<void>(cudaEventDestroy(std::exchange(ready_, nullptr)));
  if (barrier_buffer_ != nullptr) static_cast<void>(cudaFree(std::exchange(barrier_buffer_, nullptr)));
  if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(std::exchange(stream_, nullptr)));
}

void NcclCommunicator::check_nccl(ncclResult_t rc, std::string_view call) {
  if (rc == ncclSuccess) return;
  failed_ = true;
  std::string text = ncclGetErrorString(rc);
#if NCCL_VERSION_CODE >= 21300  // ncclGetLastError: NCCL 2.13
  if (const char* last = ncclGetLastError(comm_); last != nullptr && *last != '\0') text += ": " + std::string(last);
#endif
  throw Error(std::string(call) + " failed on rank " + std::to_string(rank_) + " (device " + std::to_string(device_) +
              ") with NCCL error " + std::to_string(static_cast<int>(rc)) + " (" + text +
              "); the ranks no longer agree on the data: end the job, and read every rank's output for the first "
              "failure");
}

void NcclCommunicator::check_tensor(const at::Tensor& t, std::string_view what, std::string_view role) const {
  const std::string where = std::string(what) + ": " + std::string(role);
  if (!t.defined()) throw Error(where + " is an undefined tensor; pass an allocated tensor");
  if (!t.is_contiguous()) {
    std::ostringstream strides;
    strides << t.strides();
    throw Error(where + " is not contiguous (" + describe(t) + ", strides " + strides.str() +
                "); pass t.contiguous() and copy the result back, or keep the data in a flat buffer");
  }
  if (!nccl_type(t.scalar_type()))
    throw Error(where + " has dtype " + dtype_name(t.scalar_type()) +
                ", which NcclCommunicator does not move; use float32, float64, bfloat16, float16, int64 or int32");
  const at::Device mine(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
  if (!t.is_cuda())
    throw Error(where + " is on device " + t.device().str() + "; NcclCommunicator moves CUDA tensors on " +
                mine.str() + " (its device): move it there with .to(), or use MpiCommunicator for CPU tensors");
  if (t.device().index() != device_)
    throw Error(where + " is on " + t.device().str() + ", but this NcclCommunicator works on " + mine.str() +
                "; move the tensor there, or make the communicator for the device the model runs on");
}

NcclWork NcclCommunicator::launch(std::string_view what, std::vector<at::Tensor> tensors,
                                  const std::function<void()>& calls) {
  DeviceGuard guard(device_);
  check_cuda(guard.status(), "cudaSetDevice");
  NcclWork work(std::string(what), device_, compute_stream_);
  check_cuda(cudaEventCreateWithFlags(&work.done_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  try {
    // The comm stream waits for everything queued on the compute stream so far (the inputs' producers).
    check_cuda(cudaEventRecord(ready_, compute_stream_), "cudaEventRecord (compute stream)");
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent (comm stream)");
    calls();
    check_cuda(cudaEventRecord(work.done_, stream_), "cudaEventRecord (comm stream)");
  } catch (...) {
    static_cast<void>(cudaEventDestroy(std::exchange(work.done_, nullptr)));  // never recorded: nothing to wait on
    throw;
  }
  work.tensors_ = std::move(tensors);
  return work;
}

NcclWork NcclCommunicator::all_reduce_async(const at::Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "tensor");
  check_reducible(tensor.scalar_type(), op, "all_reduce");
  return launch("all_reduce", {tensor}, [&] {
    if (tensor.numel() == 0) return;
    check_nccl(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), count(tensor), nccl_type_of(tensor), nccl_op(op),
                             comm_, stream_),
               "ncclAllReduce");
  });
}

NcclWork NcclCommunicator::all_reduce_async(std::span<const at::Tensor> tensors, ReduceOp op) {
  std::vector<std::pair<const char*, const char*>> ranges;  // [begin, end) of each non-empty tensor
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(tensors[i], "all_reduce(tensors)", "tensors[" + std::to_string(i) + "]");
    check_reducible(tensors[i].scalar_type(), op, "all_reduce(tensors)");
    if (tensors[i].numel() == 0) continue;
    const auto* begin = static_cast<const char*>(tensors[i].data_ptr());
    ranges.emplace_back(begin, begin + tensors[i].nbytes());
  }
  // NCCL reduces each tensor in place, all at once: two tensors sharing memory would race.
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw Error("all_reduce(tensors): two of the tensors share memory; pass each buffer once");
  return launch("all_reduce(tensors)", std::vector<at::Tensor>(tensors.begin(), tensors.end()), [&] {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    try {
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        const at::Tensor& t = tensors[i];
        if (t.numel() == 0) continue;
        check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), count(t), nccl_type_of(t), nccl_op(op), comm_, stream_),
                   "ncclAllReduce (tensors[" + std::to_string(i) + "])");
      }
    } catch (...) {
      static_cast<void>(ncclGroupEnd());  // leave NCCL's group mode; the error above is the one to report
      throw;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd (all_reduce(tensors))");
  });
}

NcclWork NcclCommunicator::reduce_scatter_async(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  check_tensor(input, "reduce_scatter", "input");
  check_tensor(output, "reduce_scatter", "output");
  check_same_dtype(input, output, "reduce_scatter");
  check_reducible(input.scalar_type(), op, "reduce_scatter");
  if (input.numel() != output.numel() * size_)
    throw Error("reduce_scatter: input has " + std::to_string(input.numel()) + " elements, but world size " +
                std::to_string(size_) + " x output " + std::to_string(output.numel()) + " = " +
                std::to_string(output.numel() * size_) + "; the input holds one output-sized block per rank");
  if (overlap(input, output))
    throw Error("reduce_scatter: input and output share memory; give the output its own buffer");
  return launch("reduce_scatter", {input, output}, [&] {
    if (output.numel() == 0) return;
    check_nccl(ncclReduceScatter(input.data_ptr(), output.data_ptr(), count(output), nccl_type_of(input), nccl_op(op),
                                 comm_, stream_),
               "ncclReduceScatter");
  });
}

NcclWork NcclCommunicator::all_gather_async(const at::Tensor& input, const at::Tensor& output) {
  check_tensor(input, "all_gather", "input");
  check_tensor(output, "all_gather", "output");
  check_same_dtype(input, output, "all_gather");
  if (output.numel() != input.numel() * size_)
    throw Error("all_gather: output has " + std::to_string(output.numel()) + " elements, but world size " +
                std::to_string(size_) + " x input " + std::to_string(input.numel()) + " = " +
                std::to_string(input.numel() * size_) + "; the output holds one input-sized block per rank");
  // The sharded-parameter layout: input is this rank's own block of output. NCCL gathers in place when
  // sendbuff == recvbuff + rank * count, which is exactly that.
  const auto* own_block = static_cast<const char*>(output.data_ptr()) + rank_ * input.nbytes();
  const bool in_place = input.numel() > 0 && input.data_ptr() == own_block;
  if (!in_place && overlap(input, output))
    throw Error("all_gather: input overlaps output but is not output's block " + std::to_string(rank_) +
                " (this rank's); give the input its own buffer or make it exactly that block");
  return launch("all_gather", {input, output}, [&] {
    if (input.numel() == 0) return;
    check_nccl(ncclAllGather(input.data_ptr(), output.data_ptr(), count(input), nccl_type_of(input), comm_, stream_),
               "ncclAllGather");
  });
}

NcclWork NcclCommunicator::broadcast_async(const at::Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast", "tensor");
  if (root < 0 || root >= size_)
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank of this communicator (0 .. " +
                std::to_string(size_ - 1) + ")");
  return launch("broadcast", {tensor}, [&] {
    if (tensor.numel() == 0) return;
    check_nccl(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), count(tensor), nccl_type_of(tensor), root, comm_,
                             stream_),
               "ncclBroadcast");
  });
}

void NcclCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) { all_reduce_async(tensor, op).wait(); }
void NcclCommunicator::all_reduce(std::span<const at::Tensor> tensors, ReduceOp op) {
  all_reduce_async(tensors, op).wait();
}
void NcclCommunicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  reduce_scatter_async(input, output, op).wait();
}
void NcclCommunicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  all_gather_async(input, output).wait();
}
void NcclCommunicator::broadcast(const at::Tensor& tensor, int root) { broadcast_async(tensor, root).wait(); }

void NcclCommunicator::barrier() {
  NcclWork work = launch("barrier", {}, [&] {
    check_nccl(ncclAllReduce(barrier_buffer_, barrier_buffer_, 1, ncclInt32, ncclMax, comm_, stream_),
               "ncclAllReduce (barrier)");
  });
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (barrier)");
  work.wait();
}

}  // namespace tessera::dist
