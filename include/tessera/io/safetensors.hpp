#pragma once
// defines: tessera::io safetensors support: a read-only, memory-mapped reader that enforces every
// rule of the format (throws tessera::FormatError naming the file, the rule and the value seen),
// and an atomic writer that produces the same bytes as the reference implementation.
// File layout: 8-byte little-endian u64 N, N bytes of UTF-8 JSON header, then the data buffer.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::io {

// Element types tessera reads and writes, spelled in the header as dtype_name() returns.
enum class StDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

std::size_t dtype_size(StDType dtype);                      // bytes per element
std::string_view dtype_name(StDType dtype);                 // "F32", "BF16", ...
std::optional<StDType> parse_dtype(std::string_view name);  // nullopt for any other spelling

struct TensorInfo {
  std::string name;
  StDType dtype;
  std::vector<std::int64_t> shape;
  std::size_t begin = 0, end = 0;  // byte offsets inside the data buffer; end is exclusive
  std::int64_t numel() const;      // 1 for a scalar (empty shape), 0 if any dimension is 0
};

// A validated safetensors file, mapped read-only for the object's lifetime.
class SafetensorsFile {
 public:
  // Validates the whole header (never the tensor bytes); throws FormatError on any broken rule.
  static SafetensorsFile open(const std::filesystem::path& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::filesystem::path& path() const;
  const std::vector<TensorInfo>& tensors() const;       // in header order
  const TensorInfo* find(std::string_view name) const;  // nullptr if absent
  // The tensor's bytes inside the mapping; `info` must come from this file's tensors() or find().
  std::span<const std::byte> bytes(const TensorInfo& info) const;
  const std::map<std::string, std::string>& metadata() const;  // "__metadata__", empty if absent

 private:
  SafetensorsFile() = default;

  std::filesystem::path path_;
  const std::byte* mapping_ = nullptr;  // the whole file
  std::size_t mapping_bytes_ = 0;
  std::size_t data_start_ = 0;  // file offset of the data buffer: 8 + header length, bytes
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_by_name_;  // name -> index in tensors_
  std::map<std::string, std::string> metadata_;
};

struct TensorView {
  std::string name;
  StDType dtype;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;  // exactly numel * dtype_size bytes, already little-endian
};

// Writes atomically: to "<path>.tmp-<pid>" then rename(); on any error the temp file is removed and
// nothing is left behind. Every tensor is checked before a file is created. Tensors are laid out in
// the given order; the header is padded with spaces to a multiple of 8 bytes (as the reference does).
void write_safetensors(const std::filesystem::path& path, std::span<const TensorView> tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tessera::io
