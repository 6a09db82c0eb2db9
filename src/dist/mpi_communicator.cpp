#include "tessera/dist/mpi_communicator.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <sstream>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/dist/watchdog.hpp"

namespace tessera::dist {

namespace detail {

void check_mpi(int rc, std::string_view call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw Error(std::string(call) + " failed on rank " + std::to_string(rank) + " with MPI error " + std::to_string(rc) +
              " (" + std::string(text, static_cast<std::size_t>(length)) +
              "); the ranks no longer agree on the data: end the job, and read every rank's output for the first "
              "failure");
}

OwnedComm::OwnedComm(OwnedComm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}

OwnedComm& OwnedComm::operator=(OwnedComm&& other) noexcept {
  if (this != &other) {
    OwnedComm old(std::exchange(comm_, std::exchange(other.comm_, MPI_COMM_NULL)));  // frees ours on scope exit
  }
  return *this;
}

OwnedComm::~OwnedComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

}  // namespace detail

namespace {

using detail::check_mpi;

std::string dtype_name(c10::ScalarType dtype) { return std::string(c10::toString(dtype)); }

bool is_16bit_float(c10::ScalarType dtype) { return dtype == at::kBFloat16 || dtype == at::kHalf; }

// The dtype MPI reduces in: 16-bit floats go up to float32 (MPI has no bfloat16 type).
c10::ScalarType reduce_dtype(c10::ScalarType dtype) { return is_16bit_float(dtype) ? at::kFloat : dtype; }

// MPI's datatype for moving `dtype`; 16-bit floats move as raw uint16 (never reduced in that form).
MPI_Datatype mpi_type(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    case at::kBFloat16:
    case at::kHalf: return MPI_UINT16_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << "sizes " << t.sizes() << ", dtype " << t.scalar_type() << ", device " << t.device();
  return out.str();
}

// What every tensor handed to a collective must be: defined, contiguous, a supported dtype, CPU or CUDA.
void check_tensor(const at::Tensor& t, std::string_view what, std::string_view role) {
  const std::string where = std::string(what) + ": " + std::string(role);
  if (!t.defined()) throw Error(where + " is an undefined tensor; pass an allocated tensor");
  if (!t.is_contiguous()) {
    std::ostringstream strides;
    strides << t.strides();
    throw Error(where + " is not contiguous (" + describe(t) + ", strides " + strides.str() +
                "); pass t.contiguous() and copy the result back, or keep the data in a flat buffer");
  }
  if (mpi_type(t.scalar_type()) == MPI_DATATYPE_NULL)
    throw Error(where + " has dtype " + dtype_name(t.scalar_type()) +
                ", which MpiCommunicator does not move; use float32, float64, bfloat16, float16, int64 or int32");
  if (!t.is_cpu() && !t.is_cuda())
    throw Error(where + " is on device " + t.device().str() +
                "; MpiCommunicator moves CPU tensors, and CUDA tensors through host copies");
}

void check_reducible(c10::ScalarType dtype, ReduceOp op, std::string_view what) {
  if (op == ReduceOp::avg && c10::isIntegralType(dtype, /*includeBool=*/true))
    throw Error(std::string(what) + ": avg of " + dtype_name(dtype) +
                " values would truncate; reduce with sum and divide in a floating dtype");
}

void check_same_kind(const at::Tensor& input, const at::Tensor& output, std::string_view what) {
  if (input.scalar_type() != output.scalar_type() || input.device() != output.device())
    throw Error(std::string(what) + ": input (" + describe(input) + ") and output (" + describe(output) +
                ") differ in dtype or device; give both the same");
}

bool overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.device() != b.device()) return false;
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// The CPU buffer MPI works on for `t`: t itself when it is a CPU tensor of dtype `wire`, else a fresh CPU
// tensor of that dtype (host staging for CUDA tensors, float32 for 16-bit floats), holding t's values when
// `copy_in`.
at::Tensor stage(const at::Tensor& t, c10::ScalarType wire, bool copy_in) {
  if (t.is_cpu() && t.scalar_type() == wire) return t;
  const auto options = t.options().device(at::kCPU).dtype(wire);
  return copy_in ? t.to(options) : at::empty(t.sizes(), options);
}

// Calls call(pointer, count) over `buffer` in pieces of at most max_count elements (MPI counts are int).
template <class Call>
void for_each_chunk(const at::Tensor& buffer, std::int64_t max_count, Call call) {
  auto* base = static_cast<char*>(buffer.data_ptr());
  const auto element = static_cast<std::int64_t>(buffer.element_size());
  for (std::int64_t offset = 0, n = buffer.numel(); offset < n; offset += max_count)
    call(base + offset * element, static_cast<int>(std::min(max_count, n - offset)));
}

// For the watchdog's message; arguments are checked later, so an undefined tensor counts 0.
std::int64_t bytes_of(const at::Tensor& t) { return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0; }

}  // namespace

MpiWork::MpiWork(MpiWork&& other) noexcept
    : what_(std::move(other.what_)),
      bytes_(other.bytes_),
      requests_(std::exchange(other.requests_, {})),
      finish_(std::exchange(other.finish_, {})) {}

MpiWork& MpiWork::operator=(MpiWork&& other) {
  if (this != &other) {
    wait();
    what_ = std::move(other.what_);
    bytes_ = other.bytes_;
    requests_ = std::exchange(other.requests_, {});
    finish_ = std::exchange(other.finish_, {});
  }
  return *this;
}

MpiWork::~MpiWork() {
  if (!pending()) return;
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: %s was dropped without wait() and then failed: %s\n", what_.c_str(), e.what());
    std::terminate();
  }
}

void MpiWork::run_finish() {
  at::NoGradGuard no_grad;  // write-backs into parameters or their grads are not part of any graph
  auto steps = std::exchange(finish_, {});
  for (auto& step : steps) step();
}

void MpiWork::wait() {
  if (!requests_.empty()) {
    const watchdog::Guard in_flight(what_.c_str(), bytes_);
    const int rc = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    if (rc != MPI_SUCCESS) finish_.clear();  // nothing valid to write back
    check_mpi(rc, "MPI_Waitall (" + what_ + ")");
  }
  run_finish();
}

bool MpiWork::is_completed() {
  if (!requests_.empty()) {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      requests_.clear();
      finish_.clear();  // nothing valid to write back
    }
    check_mpi(rc, "MPI_Testall (" + what_ + ")");
    if (!done) return false;
    requests_.clear();
  }
  run_finish();
  return true;
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::int64_t max_count_per_call)
    : MpiCommunicator(
          [comm] {
            MPI_Comm dup = MPI_COMM_NULL;
            check_mpi(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup");
            return detail::OwnedComm(dup);
          }(),
          max_count_per_call) {}

MpiCommunicator::MpiCommunicator(detail::OwnedComm comm, std::int64_t max_count_per_call)
    : comm_(std::move(comm)), max_count_(max_count_per_call) {
  if (max_count_per_call < 1 || max_count_per_call > max_mpi_count)
    throw Error("MpiCommunicator: max_count_per_call=" + std::to_string(max_count_per_call) +
                " is outside 1 .. 2147483647 (MPI counts are int); leave it at its default");
  check_mpi(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_.get(), &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_.get(), &size_), "MPI_Comm_size");
}

int MpiCommunicator::block_count(std::string_view what, std::int64_t elements) const {
  if (elements > max_count_)
    throw Error(std::string(what) + ": " + std::to_string(elements) + " elements per rank exceed the " +
                std::to_string(max_count_) +
                " one MPI call can move; split the buffer into buckets of at most that many elements per rank");
  return static_cast<int>(elements);
}

void MpiCommunicator::reduce_chunks(MpiWork& work, const at::Tensor& buffer, ReduceOp op, Mode mode) {
  const MPI_Datatype type = mpi_type(buffer.scalar_type());
  for_each_chunk(buffer, max_count_, [&](void* chunk, int count) {
    if (mode == Mode::blocking) {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, chunk, count, type, mpi_op(op), comm_.get()), "MPI_Allreduce");
    } else {
      MPI_Request request = MPI_REQUEST_NULL;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, chunk, count, type, mpi_op(op), comm_.get(), &request),
                "MPI_Iallreduce");
      work.requests_.push_back(request);
    }
  });
}

MpiWork MpiCommunicator::start_all_reduce(const at::Tensor& tensor, ReduceOp op, Mode mode) {
  check_tensor(tensor, "all_reduce", "tensor");
  check_reducible(tensor.scalar_type(), op, "all_reduce");
  MpiWork work("all_reduce");
  at::Tensor buffer = stage(tensor, reduce_dtype(tensor.scalar_type()), /*copy_in=*/true);
  work.bytes_ = static_cast<std::int64_t>(buffer.nbytes());
  reduce_chunks(work, buffer, op, mode);
  work.finish_.push_back([tensor, buffer, op, size = size_] {
    if (op == ReduceOp::avg) buffer.div_(size);
    if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  });
  return work;
}

MpiWork MpiCommunicator::start_all_reduce(std::span<const at::Tensor> tensors, ReduceOp op, Mode mode) {
  std::vector<c10::ScalarType> dtypes;  // in order of first appearance: the same on every rank
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(tensors[i], "all_reduce(tensors)", "tensors[" + std::to_string(i) + "]");
    check_reducible(tensors[i].scalar_type(), op, "all_reduce(tensors)");
    if (std::find(dtypes.begin(), dtypes.end(), tensors[i].scalar_type()) == dtypes.end())
      dtypes.push_back(tensors[i].scalar_type());
  }
  at::NoGradGuard no_grad;
  MpiWork work("all_reduce(tensors)");
  for (const c10::ScalarType dtype : dtypes) {
    std::vector<at::Tensor> group;
    std::int64_t total = 0;
    for (const at::Tensor& t : tensors) {
      if (t.scalar_type() != dtype) continue;
      group.push_back(t);
      total += t.numel();
    }
    at::Tensor flat = at::empty({total}, at::TensorOptions().dtype(reduce_dtype(dtype)));
    std::int64_t offset = 0;
    for (const at::Tensor& t : group) {
      flat.narrow(0, offset, t.numel()).copy_(t.view(-1));
      offset += t.numel();
    }
    reduce_chunks(work, flat, op, mode);
    work.finish_.push_back([group = std::move(group), flat, op, size = size_] {
      if (op == ReduceOp::avg) flat.div_(size);
      std::int64_t at = 0;
      for (const at::Tensor& t : group) {
        t.view(-1).copy_(flat.narrow(0, at, t.numel()));
        at += t.numel();
      }
    });
  }
  return work;
}

MpiWork MpiCommunicator::start_reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op,
                                              Mode mode) {
  check_tensor(input, "reduce_scatter", "input");
  check_tensor(output, "reduce_scatter", "output");
  check_same_kind(input, output, "reduce_scatter");
  check_reducible(input.scalar_type(), op, "reduce_scatter");
  if (input.numel() != output.numel() * size_)
    throw Error("reduce_scatter: input has " + std::to_string(input.numel()) + " elements, but world size " +
                std::to_string(size_) + " x output " + std::to_string(output.numel()) + " = " +
                std::to_string(output.numel() * size_) + "; the input holds one output-sized block per rank");
  if (overlap(input, output))
    throw Error("reduce_scatter: input and output share memory; give the output its own buffer");
  const int count = block_count("reduce_scatter", output.numel());
  const c10::ScalarType wire = reduce_dtype(input.scalar_type());
  at::Tensor send = stage(input, wire, /*copy_in=*/true);
  at::Tensor receive = stage(output, wire, /*copy_in=*/false);
  MpiWork work("reduce_scatter");
  work.bytes_ = static_cast<std::int64_t>(send.nbytes());
  const MPI_Datatype type = mpi_type(wire);
  if (mode == Mode::blocking) {
    check_mpi(MPI_Reduce_scatter_block(send.data_ptr(), receive.data_ptr(), count, type, mpi_op(op), comm_.get()),
              "MPI_Reduce_scatter_block");
  } else {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ireduce_scatter_block(send.data_ptr(), receive.data_ptr(), count, type, mpi_op(op), comm_.get(),
                                        &request),
              "MPI_Ireduce_scatter_block");
    work.requests_.push_back(request);
  }
  work.finish_.push_back([output, send, receive, op, size = size_] {
    if (op == ReduceOp::avg) receive.div_(size);
    if (!receive.is_same(output)) output.copy_(receive);
  });
  return work;
}

MpiWork MpiCommunicator::start_all_gather(const at::Tensor& input, const at::Tensor& output, Mode mode) {
  check_tensor(input, "all_gather", "input");
  check_tensor(output, "all_gather", "output");
  check_same_kind(input, output, "all_gather");
  if (output.numel() != input.numel() * size_)
    throw Error("all_gather: output has " + std::to_string(output.numel()) + " elements, but world size " +
                std::to_string(size_) + " x input " + std::to_string(input.numel()) + " = " +
                std::to_string(input.numel() * size_) + "; the output holds one input-sized block per rank");
  const int count = block_count("all_gather", input.numel());
  // The sharded-parameter layout: input is this rank's own block of output, so MPI sends it in place.
  const auto* own_block = static_cast<const char*>(output.data_ptr()) + rank_ * input.nbytes();
  const bool in_place = input.numel() > 0 && input.device() == output.device() && input.data_ptr() == own_block;
  if (!in_place && input.numel() > 0 && overlap(input, output))
    throw Error("all_gather: input overlaps output but is not output's block " + std::to_string(rank_) +
                " (this rank's); give the input its own buffer or make it exactly that block");
  const c10::ScalarType wire = input.scalar_type();  // moved as is, never reduced
  at::Tensor receive = stage(output, wire, /*copy_in=*/in_place);
  at::Tensor send = in_place ? at::Tensor() : stage(input, wire, /*copy_in=*/true);
  const void* send_ptr = in_place ? MPI_IN_PLACE : send.data_ptr();
  MpiWork work("all_gather");
  work.bytes_ = static_cast<std::int64_t>(receive.nbytes());
  const MPI_Datatype type = mpi_type(wire);
  if (mode == Mode::blocking) {
    check_mpi(MPI_Allgather(send_ptr, count, type, receive.data_ptr(), count, type, comm_.get()), "MPI_Allgather");
  } else {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgather(send_ptr, count, type, receive.data_ptr(), count, type, comm_.get(), &request),
              "MPI_Iallgather");
    work.requests_.push_back(request);
  }
  work.finish_.push_back([output, send, receive] {
    if (!receive.is_same(output)) output.copy_(receive);
  });
  return work;
}

MpiWork MpiCommunicator::start_broadcast(const at::Tensor& tensor, int root, Mode mode) {
  check_tensor(tensor, "broadcast", "tensor");
  if (root < 0 || root >= size_)
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank of this communicator (0 .. " +
                std::to_string(size_ - 1) + ")");
  at::Tensor buffer = stage(tensor, tensor.scalar_type(), /*copy_in=*/rank_ == root);
  MpiWork work("broadcast");
  work.bytes_ = static_cast<std::int64_t>(buffer.nbytes());
  const MPI_Datatype type = mpi_type(buffer.scalar_type());
  for_each_chunk(buffer, max_count_, [&](void* chunk, int count) {
    if (mode == Mode::blocking) {
      check_mpi(MPI_Bcast(chunk, count, type, root, comm_.get()), "MPI_Bcast");
    } else {
      MPI_Request request = MPI_REQUEST_NULL;
      check_mpi(MPI_Ibcast(chunk, count, type, root, comm_.get(), &request), "MPI_Ibcast");
      work.requests_.push_back(request);
    }
  });
  work.finish_.push_back([tensor, buffer] {
    if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  });
  return work;
}

void MpiCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  const watchdog::Guard in_flight("all_reduce", bytes_of(tensor));
  start_all_reduce(tensor, op, Mode::blocking).wait();
}
void MpiCommunicator::all_reduce(std::span<const at::Tensor> tensors, ReduceOp op) {
  std::int64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += bytes_of(t);
  const watchdog::Guard in_flight("all_reduce", bytes);
  start_all_reduce(tensors, op, Mode::blocking).wait();
}
void MpiCommunicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  const watchdog::Guard in_flight("reduce_scatter", bytes_of(input));
  start_reduce_scatter(input, output, op, Mode::blocking).wait();
}
void MpiCommunicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  const watchdog::Guard in_flight("all_gather", bytes_of(output));
  start_all_gather(input, output, Mode::blocking).wait();
}
void MpiCommunicator::broadcast(const at::Tensor& tensor, int root) {
  const watchdog::Guard in_flight("broadcast", bytes_of(tensor));
  start_broadcast(tensor, root, Mode::blocking).wait();
}
void MpiCommunicator::barrier() {
  const watchdog::Guard in_flight("barrier", 0);
  check_mpi(MPI_Barrier(comm_.get()), "MPI_Barrier");
}

MpiWork MpiCommunicator::all_reduce_async(const at::Tensor& tensor, ReduceOp op) {
  return start_all_reduce(tensor, op, Mode::nonblocking);
}
MpiWork MpiCommunicator::all_reduce_async(std::span<const at::Tensor> tensors, ReduceOp op) {
  return start_all_reduce(tensors, op, Mode::nonblocking);
}
MpiWork MpiCommunicator::reduce_scatter_async(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  return start_reduce_scatter(input, output, op, Mode::nonblocking);
}
MpiWork MpiCommunicator::all_gather_async(const at::Tensor& input, const at::Tensor& output) {
  return start_all_gather(input, output, Mode::nonblocking);
}
MpiWork MpiCommunicator::broadcast_async(const at::Tensor& tensor, int root) {
  return start_broadcast(tensor, root, Mode::nonblocking);
}

}  // namespace tessera::dist
