// implements: tessera::io safetensors reader (mmap + header validation) and atomic writer.
#include "tessera/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "tessera/core/error.hpp"
#include "tessera/core/new_file.hpp"
#include "tessera/core/partial_files.hpp"
#include "tessera/io/json_file.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kLengthPrefixBytes = 8;           // the little-endian u64 header length
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr char kCorrupt[] = "; the file is corrupt or was written by a buggy tool";

struct DTypeEntry {
  StDType dtype;
  std::string_view name;
  std::size_t bytes;
};
constexpr std::array<DTypeEntry, 10> kDTypes{{{StDType::F64, "F64", 8},
                                              {StDType::F32, "F32", 4},
                                              {StDType::F16, "F16", 2},
                                              {StDType::BF16, "BF16", 2},
                                              {StDType::I64, "I64", 8},
                                              {StDType::I32, "I32", 4},
                                              {StDType::I16, "I16", 2},
                                              {StDType::I8, "I8", 1},
                                              {StDType::U8, "U8", 1},
                                              {StDType::BOOL, "BOOL", 1}}};

const DTypeEntry& dtype_entry(StDType dtype) {
  return kDTypes[static_cast<std::size_t>(dtype)];  // kDTypes is in enum order
}

std::string supported_dtype_list() {
  std::string list;
  for (const auto& entry : kDTypes) list += (list.empty() ? "" : ", ") + std::string(entry.name);
  return list;
}

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw FormatError(path.string() + ": " + what);
}

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string offsets_text(std::size_t begin, std::size_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

std::string byte_range_text(std::size_t begin, std::size_t end) {  // half-open, in bytes
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// Raw header bytes for a message: printable ASCII as is, anything else as \xNN, so the message
// stays valid UTF-8 whatever the file holds.
std::string printable(std::string_view bytes) {
  std::string text;
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      text += c;
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      text += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 0xf];
    }
  }
  return text;
}

// Bytes a tensor of this dtype and (non-negative) shape occupies; nullopt if that overflows u64
// or its element count overflows i64.
std::optional<std::uint64_t> byte_count(StDType dtype, std::span<const std::int64_t> shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t numel = 1;
  for (std::int64_t dim : shape) {
    if (__builtin_mul_overflow(numel, dim, &numel)) return std::nullopt;
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(numel), dtype_size(dtype), &bytes)) return std::nullopt;
  return bytes;
}

// ---- reading ----

// Owns a POSIX file descriptor so every early exit closes it.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

std::optional<std::uint64_t> as_non_negative_integer(const json& value) {
  if (!value.is_number_integer()) return std::nullopt;  // rejects floats such as 1.0 and 1e3
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  const auto signed_value = value.get<std::int64_t>();
  if (signed_value < 0) return std::nullopt;
  return static_cast<std::uint64_t>(signed_value);
}

// [begin, end] in bytes, or nullopt unless it is two non-negative integers with begin <= end.
std::optional<std::pair<std::size_t, std::size_t>> parse_data_offsets(const json& offsets) {
  if (!offsets.is_array() || offsets.size() != 2) return std::nullopt;
  const auto begin = as_non_negative_integer(offsets[0]);
  const auto end = as_non_negative_integer(offsets[1]);
  if (!begin || !end || *begin > *end) return std::nullopt;
  return std::pair{*begin, *end};
}

// One SAX pass over the header: rejects a key repeated inside one object (a tensor name, or a field
// of one entry), which nlohmann::json would silently collapse to the last, and records the top-level
// keys in header order, which the std::map-based json object loses. O(log k) per key, so
// O(n log n) in all. (nlohmann's callback parser could do this, but it rescans the parent object at
// the end of every nested object: O(n^2) for a header of n tensors.)
class HeaderKeyChecker final : public nlohmann::json_sax<json> {
 public:
  explicit HeaderKeyChecker(const fs::path& path) : path_(path) {}

  std::vector<std::string> top_level_keys;

  bool start_object(std::size_t) override {
    keys_of_open_objects_.emplace_back();
    return true;
  }
  bool end_object() override {
    keys_of_open_objects_.pop_back();
    return true;
  }
  bool key(string_t& key) override {
    const bool top_level = keys_of_open_objects_.size() == 1;
    if (!keys_of_open_objects_.back().insert(key).second) {
      fail(path_, top_level ? "header lists tensor name '" + key + "' twice; tensor names must be unique" + kCorrupt
                            : "header has key \"" + key + "\" twice inside one object; keys must be unique" + kCorrupt);
    }
    if (top_level) top_level_keys.push_back(key);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& error) override {
    // nlohmann quotes the offending bytes, which may themselves be invalid UTF-8.
    fail(path_, "header is not valid UTF-8 JSON: " + printable(error.what()) + kCorrupt);
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }

 private:
  const fs::path& path_;
  std::vector<std::set<std::string>> keys_of_open_objects_;
};

std::map<std::string, std::string> parse_metadata(const fs::path& path, const json& value) {
  if (!value.is_object()) {
    fail(path, "\"__metadata__\" must be an object of string values but is a " + std::string(value.type_name()) + ": " +
                   json_excerpt(value));
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, entry] : value.items()) {
    if (!entry.is_string()) {
      fail(path, "\"__metadata__\" must be an object of string values but key '" + key + "' has " +
                     std::string(entry.type_name()) + " value " + json_excerpt(entry));
    }
    metadata.emplace(key, entry.get<std::string>());
  }
  return metadata;
}

TensorInfo parse_tensor_entry(const fs::path& path, const std::string& name, const json& entry,
                              std::size_t data_buffer_bytes) {
  const std::string tensor = "tensor '" + name + "'";
  const bool has_exact_keys = entry.is_object() && entry.size() == 3 && entry.contains("dtype") &&
                              entry.contains("shape") && entry.contains("data_offsets");
  if (!has_exact_keys) {
    fail(path, tensor + " must be an object with exactly the keys \"dtype\", \"shape\", \"data_offsets\" but is " +
                   json_excerpt(entry) + kCorrupt);
  }
  TensorInfo info;
  info.name = name;

  const json& dtype = entry["dtype"];
  const auto parsed_dtype = dtype.is_string() ? parse_dtype(dtype.get<std::string>()) : std::nullopt;
  if (!parsed_dtype) {
    fail(path, tensor + " has dtype " + json_excerpt(dtype) + " but tessera supports only " + supported_dtype_list());
  }
  info.dtype = *parsed_dtype;

  const json& shape = entry["shape"];
  const std::string shape_rule = std::string(" but a shape must be a list of non-negative integers") + kCorrupt;
  if (!shape.is_array()) fail(path, tensor + " has shape " + json_excerpt(shape) + shape_rule);
  for (const json& dim : shape) {
    const auto value = as_non_negative_integer(dim);
    if (!value || *value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(path, tensor + " has shape " + json_excerpt(shape) + shape_rule);
    }
    info.shape.push_back(static_cast<std::int64_t>(*value));
  }

  const json& offsets = entry["data_offsets"];
  const auto begin_end = parse_data_offsets(offsets);
  if (!begin_end) {
    fail(path, tensor + " has data_offsets " + json_excerpt(offsets) +
                   " but data_offsets must be [begin, end]: two non-negative integers with begin <= end" + kCorrupt);
  }
  std::tie(info.begin, info.end) = *begin_end;

  const auto needed_bytes = byte_count(info.dtype, info.shape);
  const std::string layout = "dtype " + std::string(dtype_name(info.dtype)) + " with shape " + shape_text(info.shape);
  if (!needed_bytes) fail(path, tensor + " has " + layout + ", whose byte count overflows 64 bits" + kCorrupt);
  if (info.end - info.begin != *needed_bytes) {
    fail(path, tensor + " has data_offsets " + offsets_text(info.begin, info.end) + " = " +
                   std::to_string(info.end - info.begin) + " bytes but " + layout + " needs " +
                   std::to_string(*needed_bytes) + " bytes" + kCorrupt);
  }
  if (info.end > data_buffer_bytes) {
    fail(path, tensor + " has data_offsets " + offsets_text(info.begin, info.end) + " but the data buffer is only " +
                   std::to_string(data_buffer_bytes) + " bytes; the file is truncated or corrupt");
  }
  return info;
}

// Sorted by offset, the tensors must cover [0, data_buffer_bytes) exactly once. A zero-size tensor
// sorts before a tensor starting at the same offset, so it passes only at a tensor boundary.
void check_tensors_tile_buffer(const fs::path& path, const std::vector<TensorInfo>& tensors,
                               std::size_t data_buffer_bytes) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& info : tensors) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* info : by_offset) {
    const std::size_t expected_begin = previous ? previous->end : 0;
    const std::string current =
        "tensor '" + info->name + "' (data_offsets " + offsets_text(info->begin, info->end) + ")";
    if (!previous && info->begin != 0) {
      fail(path, "the first tensor in the data buffer, " + current + ", must start at byte 0; bytes " +
                     byte_range_text(0, info->begin) + " belong to no tensor" + kCorrupt);
    }
    if (previous && info->begin != expected_begin) {
      const std::string before =
          "tensor '" + previous->name + "' (data_offsets " + offsets_text(previous->begin, previous->end) + ")";
      fail(path, info->begin > expected_begin
                     ? "gap in the data buffer: bytes " + byte_range_text(expected_begin, info->begin) + " between " +
                           before + " and " + current + " belong to no tensor; tensors must tile the buffer" + kCorrupt
                     : current + " overlaps " + before + "; tensors must not share bytes" + kCorrupt);
    }
    previous = info;
  }
  const std::size_t covered_end = previous ? previous->end : 0;
  if (covered_end != data_buffer_bytes) {
    fail(path, "the data buffer is " + std::to_string(data_buffer_bytes) + " bytes but its tensors end at byte " +
                   std::to_string(covered_end) + "; the trailing bytes " +
                   byte_range_text(covered_end, data_buffer_bytes) + " belong to no tensor" + kCorrupt);
  }
}

// ---- writing ----

// The JSON header, padded with spaces to a multiple of 8 bytes; checks every tensor, so any error
// surfaces before a file is created. Members are emitted in layout order with "__metadata__" first,
// and each entry's keys as dtype, shape, data_offsets: the reference implementation's byte order.
std::string build_header(const fs::path& path, std::span<const TensorView> tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  const auto append_member = [&header](const std::string& key, const std::string& value_json) {
    if (header.size() > 1) header += ',';
    header += json(key).dump() + ":" + value_json;
  };
  try {
    if (!metadata.empty()) append_member(std::string(kMetadataKey), json(metadata).dump());
    std::set<std::string_view> seen_names;
    std::uint64_t offset = 0;  // bytes into the data buffer
    for (const auto& tensor : tensors) {
      const std::string cannot = "cannot write tensor '" + tensor.name + "': ";
      if (tensor.name == kMetadataKey) fail(path, cannot + "the name \"__metadata__\" is reserved for metadata");
      if (!seen_names.insert(tensor.name).second) fail(path, cannot + "the name appears twice; names must be unique");
      if (std::any_of(tensor.shape.begin(), tensor.shape.end(), [](std::int64_t dim) { return dim < 0; })) {
        fail(path, cannot + "shape " + shape_text(tensor.shape) + " has a negative dimension");
      }
      const auto needed_bytes = byte_count(tensor.dtype, tensor.shape);
      const std::string layout =
          "dtype " + std::string(dtype_name(tensor.dtype)) + " with shape " + shape_text(tensor.shape);
      if (!needed_bytes) fail(path, cannot + layout + " has a byte count that overflows 64 bits");
      if (*needed_bytes != tensor.data.size()) {
        fail(path, cannot + layout + " needs " + std::to_string(*needed_bytes) + " bytes but " +
                       std::to_string(tensor.data.size()) + " bytes of data were given");
      }
      nlohmann::ordered_json entry;
      entry["dtype"] = dtype_name(tensor.dtype);
      entry["shape"] = tensor.shape;
      entry["data_offsets"] = {offset, offset + *needed_bytes};
      append_member(tensor.name, entry.dump());
      offset += *needed_bytes;
    }
  } catch (const json::type_error& error) {  // dump() rejects invalid UTF-8
    fail(path, "cannot write: a tensor name or metadata string is not valid UTF-8 (" + std::string(error.what()) + ")");
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeaderBytes) {
    fail(path, "cannot write: the header would be " + std::to_string(header.size()) +
                   " bytes but readers accept at most " + std::to_string(kMaxHeaderBytes));
  }
  return header;
}

void write_all(const fs::path& path, int fd, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) fail(path, std::string("write failed: ") + std::strerror(errno));
    bytes = bytes.subspan(static_cast<std::size_t>(written));
  }
}

}  // namespace

std::size_t dtype_size(StDType dtype) { return dtype_entry(dtype).bytes; }

std::string_view dtype_name(StDType dtype) { return dtype_entry(dtype).name; }

std::optional<StDType> parse_dtype(std::string_view name) {
  for (const auto& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

std::int64_t TensorInfo::numel() const {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t count = 1;
  for (std::int64_t dim : shape) count *= dim;  // fits: open() checked it against the file size
  return count;
}

SafetensorsFile SafetensorsFile::open(const fs::path& path) {
  SafetensorsFile file;
  file.path_ = path;
  {
    // O_NONBLOCK: a FIFO in place of the file must not block us (it is then refused as not regular).
    const FileDescriptor descriptor{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (descriptor.fd < 0) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
    struct stat status {};
    if (::fstat(descriptor.fd, &status) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
    if (!S_ISREG(status.st_mode)) fail(path, "is not a regular file; expected a .safetensors file");
    const auto file_bytes = static_cast<std::size_t>(status.st_size);
    if (file_bytes < kLengthPrefixBytes) {
      fail(path, "file is " + std::to_string(file_bytes) +
                     " bytes but a safetensors file needs at least 8 (the header length); the file is truncated");
    }
    void* mapping = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, descriptor.fd, 0);
    if (mapping == MAP_FAILED) fail(path, std::string("cannot mmap: ") + std::strerror(errno));
    file.mapping_ = static_cast<const std::byte*>(mapping);  // from here the destructor unmaps
    file.mapping_bytes_ = file_bytes;
  }

  std::uint64_t header_bytes = 0;
  for (std::size_t i = 0; i < kLengthPrefixBytes; ++i) {
    header_bytes |= static_cast<std::uint64_t>(file.mapping_[i]) << (8 * i);  // little-endian
  }
  if (header_bytes > kMaxHeaderBytes) {
    fail(path, "header length is " + std::to_string(header_bytes) + " bytes but at most " +
                   std::to_string(kMaxHeaderBytes) + " is allowed" + kCorrupt);
  }
  if (header_bytes > file.mapping_bytes_ - kLengthPrefixBytes) {
    fail(path, "header length is " + std::to_string(header_bytes) + " bytes but the file has only " +
                   std::to_string(file.mapping_bytes_ - kLengthPrefixBytes) +
                   " bytes after the 8-byte length; the file is truncated or corrupt");
  }
  file.data_start_ = kLengthPrefixBytes + header_bytes;
  const std::size_t data_buffer_bytes = file.mapping_bytes_ - file.data_start_;

  const std::string_view header_text(reinterpret_cast<const char*>(file.mapping_ + kLengthPrefixBytes), header_bytes);
  // With a leading '{' a successful parse can only yield an object, so this also rules out non-objects.
  if (header_text.empty() || header_text.front() != '{') {
    fail(path, "header must be a JSON object starting with '{' but starts with " +
                   (header_text.empty() ? std::string("nothing (length 0)")
                                        : "\"" + printable(header_text.substr(0, 16)) + "\"") +
                   kCorrupt);
  }
  // The format pads the header with spaces; a NUL byte anywhere is corruption (and would end nlohmann's
  // input early, hiding what follows).
  if (const std::size_t nul = header_text.find('\0'); nul != std::string_view::npos) {
    fail(path, "header has a NUL byte at header offset " + std::to_string(nul) +
                   "; safetensors headers are UTF-8 JSON padded with spaces" + kCorrupt);
  }
  if (const auto too_deep = json_nesting_error(header_text)) fail(path, "header " + *too_deep + kCorrupt);
  HeaderKeyChecker checker(path);
  json::sax_parse(header_text.begin(), header_text.end(), &checker);
  const json header = json::parse(header_text);  // cannot fail: the same text just parsed

  for (const auto& name : checker.top_level_keys) {
    const json& entry = header.find(name).value();
    if (name == kMetadataKey) {
      file.metadata_ = parse_metadata(path, entry);
      continue;
    }
    file.index_by_name_.emplace(name, file.tensors_.size());
    file.tensors_.push_back(parse_tensor_entry(path, name, entry, data_buffer_bytes));
  }
  check_tensors_tile_buffer(path, file.tensors_, data_buffer_bytes);
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_bytes_(std::exchange(other.mapping_bytes_, 0)),
      data_start_(std::exchange(other.data_start_, 0)),
      tensors_(std::move(other.tensors_)),
      index_by_name_(std::move(other.index_by_name_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    SafetensorsFile taken(std::move(other));
    std::swap(path_, taken.path_);
    std::swap(mapping_, taken.mapping_);  // `taken` unmaps our old mapping
    std::swap(mapping_bytes_, taken.mapping_bytes_);
    std::swap(data_start_, taken.data_start_);
    std::swap(tensors_, taken.tensors_);
    std::swap(index_by_name_, taken.index_by_name_);
    std::swap(metadata_, taken.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(const_cast<std::byte*>(mapping_), mapping_bytes_);
}

const fs::path& SafetensorsFile::path() const { return path_; }

const std::vector<TensorInfo>& SafetensorsFile::tensors() const { return tensors_; }

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto found = index_by_name_.find(name);
  return found == index_by_name_.end() ? nullptr : &tensors_[found->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& info) const {
  if (info.begin > info.end || info.end > mapping_bytes_ - data_start_) {
    fail(path_, "tensor '" + info.name + "' with data_offsets " + offsets_text(info.begin, info.end) +
                    " does not belong to this file");
  }
  return {mapping_ + data_start_ + info.begin, info.end - info.begin};
}

const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return metadata_; }

void write_safetensors(const fs::path& path, std::span<const TensorView> tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(path, tensors, metadata);
  std::array<std::byte, kLengthPrefixBytes> length_prefix{};
  for (std::size_t i = 0; i < kLengthPrefixBytes; ++i) {
    length_prefix[i] = static_cast<std::byte>((static_cast<std::uint64_t>(header.size()) >> (8 * i)) & 0xff);
  }

  // A new file of its own beside `path` (core/new_file.hpp: never opened through a file or link already there).
  PartialFile temp;
  try {
    temp = create_partial_file(path);
  } catch (const Error& e) {
    fail(path, e.what());
  }
  const FileDescriptor descriptor{temp.fd};
  try {
    write_all(path, descriptor.fd, length_prefix);
    write_all(path, descriptor.fd, std::as_bytes(std::span(header)));
    for (const auto& tensor : tensors) write_all(path, descriptor.fd, tensor.data);
    // Flush before rename so a crash cannot leave a complete-looking name over incomplete bytes.
    if (::fsync(descriptor.fd) != 0) fail(path, std::string("fsync failed: ") + std::strerror(errno));
    if (::rename(temp.path.c_str(), path.c_str()) != 0) {
      fail(path, "cannot rename " + temp.path.string() + " into place: " + std::strerror(errno));
    }
  } catch (...) {
    ::unlink(temp.path.c_str());
    unregister_partial_file(temp.path);
    throw;
  }
  unregister_partial_file(temp.path);
}

}  // namespace tessera::io
