#pragma once
// defines: conversions between safetensors records and LibTorch tensors (dtype mapping, copies).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <span>
#include <string>

#include "tessera/io/safetensors.hpp"

namespace tessera {

// A CPU tensor holding a copy of the record's bytes in the record's dtype (F32, BF16, F16, F64, I64, ...).
at::Tensor tensor_from_bytes(const io::TensorInfo& info, std::span<const std::byte> bytes);
// A view of a contiguous CPU tensor's bytes for writing; the tensor must outlive the view.
io::TensorView tensor_view(std::string name, const at::Tensor& contiguous_cpu);
// safetensors dtype <-> LibTorch dtype; FormatError for a dtype LibTorch cannot hold.
c10::ScalarType to_scalar_type(io::StDType dtype);
io::StDType to_st_dtype(c10::ScalarType dtype);
// Hugging Face's "torch_dtype" spelling: "float32", "bfloat16", "float16".
std::string torch_dtype_name(c10::ScalarType dtype);

}  // namespace tessera
