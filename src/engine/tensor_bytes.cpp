#include "tessera/engine/tensor_bytes.hpp"

#include <ATen/ATen.h>

#include <cstring>

#include "tessera/core/error.hpp"

namespace tessera {

c10::ScalarType to_scalar_type(io::StDType dtype) {
  switch (dtype) {
    case io::StDType::F64: return at::kDouble;
    case io::StDType::F32: return at::kFloat;
    case io::StDType::F16: return at::kHalf;
    case io::StDType::BF16: return at::kBFloat16;
    case io::StDType::I64: return at::kLong;
    case io::StDType::I32: return at::kInt;
    case io::StDType::I16: return at::kShort;
    case io::StDType::I8: return at::kChar;
    case io::StDType::U8: return at::kByte;
    case io::StDType::BOOL: return at::kBool;
  }
  throw FormatError("unhandled safetensors dtype");
}

io::StDType to_st_dtype(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble: return io::StDType::F64;
    case at::kFloat: return io::StDType::F32;
    case at::kHalf: return io::StDType::F16;
    case at::kBFloat16: return io::StDType::BF16;
    case at::kLong: return io::StDType::I64;
    case at::kInt: return io::StDType::I32;
    case at::kShort: return io::StDType::I16;
    case at::kChar: return io::StDType::I8;
    case at::kByte: return io::StDType::U8;
    case at::kBool: return io::StDType::BOOL;
    default: break;
  }
  throw Error(std::string("dtype ") + c10::toString(dtype) + " has no safetensors equivalent");
}

std::string torch_dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return c10::toString(dtype);
  }
}

at::Tensor tensor_from_bytes(const io::TensorInfo& info, std::span<const std::byte> bytes) {
  at::Tensor out = at::empty(info.shape, at::TensorOptions().dtype(to_scalar_type(info.dtype)));
  // Copy rather than wrap: the mapped file may not keep tensor data aligned to its element size.
  if (!bytes.empty()) std::memcpy(out.data_ptr(), bytes.data(), bytes.size());
  return out;
}

io::TensorView tensor_view(std::string name, const at::Tensor& t) {
  const auto* data = static_cast<const std::byte*>(t.data_ptr());
  return io::TensorView{std::move(name), to_st_dtype(t.scalar_type()),
                        std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()),
                        std::span<const std::byte>(data, t.nbytes())};
}

}  // namespace tessera
