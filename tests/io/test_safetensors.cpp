// tests: tessera::io safetensors reader/writer: round trips, byte-exact format, every corrupt-file rule, atomic writes.
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/io/safetensors.hpp"

namespace {

namespace fs = std::filesystem;
using namespace tessera::io;
using Catch::Contains;

// A fresh directory under the system temp dir, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string name = (fs::temp_directory_path() / "tessera-io-test-XXXXXX").string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path_ = name;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void write_raw(const fs::path& path, const std::string& content) { std::ofstream(path, std::ios::binary) << content; }

std::string read_raw(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string little_endian_u64(std::uint64_t value) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

// A file laid out per the spec: 8-byte little-endian header length, the header, then the data buffer.
std::string file_bytes(const std::string& header, const std::string& data = "") {
  return little_endian_u64(header.size()) + header + data;
}

template <typename T>
std::vector<std::byte> bytes_of(std::initializer_list<T> values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.begin(), bytes.size());  // the host (x86-64) is little-endian, as the format
  return bytes;
}

std::string as_string(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Opens `path`, requires a FormatError, and requires its message to name the path and every fragment.
void require_open_fails(const fs::path& path, std::initializer_list<std::string> fragments) {
  std::string message;
  try {
    SafetensorsFile::open(path);
  } catch (const tessera::FormatError& error) {
    message = error.what();
  }
  INFO("message: " << message);
  REQUIRE_FALSE(message.empty());
  CHECK_THAT(message, Contains(path.string()));
  for (const auto& fragment : fragments) CHECK_THAT(message, Contains(fragment));
}

// Writes a file with this header and data, then requires open() to fail naming every fragment.
void require_corrupt(const std::string& header, const std::string& data, std::initializer_list<std::string> fragments) {
  TempDir dir;
  const fs::path path = dir / "model.safetensors";
  write_raw(path, file_bytes(header, data));
  require_open_fails(path, fragments);
}

const std::string kF32Entry = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

}  // namespace

TEST_CASE("safetensors: dtype names and sizes", "[io]") {
  const std::vector<std::pair<StDType, std::size_t>> expected{
      {StDType::F64, 8}, {StDType::F32, 4}, {StDType::F16, 2}, {StDType::BF16, 2}, {StDType::I64, 8},
      {StDType::I32, 4}, {StDType::I16, 2}, {StDType::I8, 1},  {StDType::U8, 1},   {StDType::BOOL, 1}};
  for (const auto& [dtype, size] : expected) {
    CHECK(dtype_size(dtype) == size);
    CHECK(parse_dtype(dtype_name(dtype)) == dtype);
  }
  CHECK(dtype_name(StDType::BF16) == "BF16");
  CHECK_FALSE(parse_dtype("f32"));
  CHECK_FALSE(parse_dtype("F8_E4M3"));
  CHECK(TensorInfo{"s", StDType::F32, {}, 0, 4}.numel() == 1);
  CHECK(TensorInfo{"z", StDType::F32, {3, 0}, 0, 0}.numel() == 0);
  CHECK(TensorInfo{"m", StDType::F32, {2, 3}, 0, 24}.numel() == 6);
}

TEST_CASE("safetensors: round trip of every dtype, a scalar, a zero-size tensor and metadata", "[io]") {
  TempDir dir;
  const fs::path path = dir / "model.safetensors";
  const auto f64 = bytes_of<double>({1.5, -2.25});
  const auto f32 = bytes_of<float>({1, 2, 3, 4, 5, 6});
  const auto f16 = bytes_of<std::uint16_t>({0x3c00, 0xc000});
  const auto bf16 = bytes_of<std::uint16_t>({0x3f80, 0x4000, 0x4040});
  const auto i64 = bytes_of<std::int64_t>({-7});
  const auto i32 = bytes_of<std::int32_t>({1, -1, 2, -2});
  const auto i16 = bytes_of<std::int16_t>({300, -300});
  const auto i8 = bytes_of<std::int8_t>({-1, 1, 5});
  const auto u8 = bytes_of<std::uint8_t>({255});
  const auto flags = bytes_of<std::uint8_t>({1, 0});
  const std::vector<TensorView> tensors{
      {"f64", StDType::F64, {2}, f64},    {"f32", StDType::F32, {2, 3}, f32},    {"empty", StDType::F32, {0, 4}, {}},
      {"f16", StDType::F16, {2}, f16},    {"bf16", StDType::BF16, {3, 1}, bf16}, {"scalar", StDType::I64, {}, i64},
      {"i32", StDType::I32, {2, 2}, i32}, {"i16", StDType::I16, {2}, i16},       {"i8", StDType::I8, {3}, i8},
      {"u8", StDType::U8, {1, 1, 1}, u8}, {"flags", StDType::BOOL, {2}, flags}};
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"note", "héllo \"quoted\"\n"}};
  write_safetensors(path, tensors, metadata);
  CHECK(entries(dir.path()) == std::vector<std::string>{"model.safetensors"});

  const auto file = SafetensorsFile::open(path);
  CHECK(file.path() == path);
  CHECK(file.metadata() == metadata);
  REQUIRE(file.tensors().size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& info = file.tensors()[i];  // header order == given order
    CHECK(info.name == tensors[i].name);
    CHECK(info.dtype == tensors[i].dtype);
    CHECK(info.shape == tensors[i].shape);
    CHECK(as_string(file.bytes(info)) == as_string(tensors[i].data));
    CHECK(file.find(tensors[i].name) == &info);
  }
  CHECK(file.find("missing") == nullptr);
  CHECK(file.find("empty")->begin == file.find("empty")->end);
}

TEST_CASE("safetensors: reads the reference implementation's own test vector byte for byte", "[io]") {
  // From huggingface/safetensors' tests: header length 0x3c = 60, one I32 [2, 2] tensor of 16 zero bytes.
  const std::string reference = std::string("<\0\0\0\0\0\0\0", 8) +
                                R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})" +
                                std::string(16, '\0');
  TempDir dir;
  write_raw(dir / "ref.safetensors", reference);
  const auto file = SafetensorsFile::open(dir / "ref.safetensors");
  REQUIRE(file.tensors().size() == 1);
  const TensorInfo& test = file.tensors()[0];
  CHECK(test.name == "test");
  CHECK(test.dtype == StDType::I32);
  CHECK(test.shape == std::vector<std::int64_t>{2, 2});
  CHECK(test.numel() == 4);
  CHECK(as_string(file.bytes(test)) == std::string(16, '\0'));
  CHECK(file.metadata().empty());
}

TEST_CASE("safetensors: a hand-built file keeps header order, padding and zero-size tensors at boundaries", "[io]") {
  // Header order (b, z0, a, z1) differs from layout order (z0, a, z1, b); trailing spaces are padding.
  const std::string header = R"({"b":{"dtype":"I8","shape":[1,2],"data_offsets":[8,10]},)"
                             R"("z0":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                             R"("__metadata__":{"format":"pt"},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("z1":{"dtype":"BF16","shape":[3,0],"data_offsets":[8,8]}}     )";
  const auto a = bytes_of<float>({0.5f, -1.0f});
  const std::string data = as_string(a) + "\x7f\x80";
  TempDir dir;
  write_raw(dir / "hand.safetensors", file_bytes(header, data));
  const auto file = SafetensorsFile::open(dir / "hand.safetensors");
  std::vector<std::string> names;
  for (const auto& info : file.tensors()) names.push_back(info.name);
  CHECK(names == std::vector<std::string>{"b", "z0", "a", "z1"});
  CHECK(as_string(file.bytes(*file.find("a"))) == as_string(a));
  CHECK(as_string(file.bytes(*file.find("b"))) == "\x7f\x80");
  CHECK(file.bytes(*file.find("z1")).empty());
  CHECK(file.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
}

TEST_CASE("safetensors: writes the reference layout: u64 length, compact JSON, space padding, data", "[io]") {
  TempDir dir;
  const auto w = bytes_of<float>({1.0f, 2.0f});
  const auto ids = bytes_of<std::int64_t>({42});
  const std::vector<TensorView> tensors{{"w", StDType::F32, {2}, w}, {"ids", StDType::I64, {1}, ids}};
  write_safetensors(dir / "out.safetensors", tensors, {{"format", "pt"}});
  const std::string json = R"({"__metadata__":{"format":"pt"},)"
                           R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("ids":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  const std::string padded = json + std::string((8 - json.size() % 8) % 8, ' ');
  REQUIRE(padded.size() % 8 == 0);
  const std::string written = read_raw(dir / "out.safetensors");
  CHECK(written.substr(0, 8) == little_endian_u64(padded.size()));
  CHECK(written == file_bytes(padded, as_string(w) + as_string(ids)));

  SECTION("an empty file list is a valid file of header {} padded to 8 bytes") {
    write_safetensors(dir / "empty.safetensors", {});
    CHECK(read_raw(dir / "empty.safetensors") == file_bytes("{}      "));
    CHECK(SafetensorsFile::open(dir / "empty.safetensors").tensors().empty());
  }
}

TEST_CASE("safetensors: the temporary file is new, never opened through a link planted under its name", "[io]") {
  TempDir dir;
  write_raw(dir / "data.bin", "keep me");
  const std::string pid = std::to_string(::getpid());
  fs::create_symlink(dir / "data.bin", dir / ("out.safetensors.partial-" + pid));  // once: .tmp-<pid>, O_TRUNC
  const auto w = bytes_of<float>({1.0f, 2.0f});
  write_safetensors(dir / "out.safetensors", std::vector<TensorView>{{"w", StDType::F32, {2}, w}});
  CHECK(read_raw(dir / "data.bin") == "keep me");
  CHECK(fs::is_symlink(dir / ("out.safetensors.partial-" + pid)));
  CHECK(SafetensorsFile::open(dir / "out.safetensors").tensors().size() == 1);
  CHECK_FALSE(fs::exists(dir / ("out.safetensors.partial-" + pid + "-1")));
}

TEST_CASE("safetensors: rejects files too short for the length or the header", "[io]") {
  TempDir dir;
  const fs::path path = dir / "x.safetensors";
  SECTION("shorter than 8 bytes") {
    write_raw(path, "abc");
    require_open_fails(path, {"3 bytes", "at least 8"});
  }
  SECTION("empty") {
    write_raw(path, "");
    require_open_fails(path, {"0 bytes", "at least 8"});
  }
  SECTION("header length above 100,000,000") {
    write_raw(path, little_endian_u64(100'000'001) + "{}");
    require_open_fails(path, {"100000001", "at most 100000000"});
  }
  SECTION("header length beyond the end of the file") {
    write_raw(path, little_endian_u64(64) + "{}");
    require_open_fails(path, {"header length is 64 bytes", "only 2 bytes"});
  }
  SECTION("truncated data buffer") {
    const auto values = bytes_of<float>({1, 2, 3, 4});
    const std::vector<TensorView> tensors{{"w", StDType::F32, {4}, values}};
    write_safetensors(path, tensors);
    fs::resize_file(path, fs::file_size(path) - 3);
    require_open_fails(path, {"tensor 'w'", "[0, 16]", "only 13 bytes", "truncated"});
  }
  SECTION("missing file") { require_open_fails(dir / "absent.safetensors", {"cannot open"}); }
  SECTION("a directory") { require_open_fails(dir.path(), {"not a regular file"}); }
}

TEST_CASE("safetensors: rejects headers that are not a JSON object", "[io]") {
  SECTION("empty header") { require_corrupt("", "", {"starting with '{'", "nothing"}); }
  SECTION("leading whitespace") { require_corrupt(" {}", "", {"starting with '{'", "\" {}\""}); }
  SECTION("a non-UTF-8 first byte") { require_corrupt("\xff{}", "", {"starting with '{'", "\"\\xff{}\""}); }
  SECTION("an array") { require_corrupt("[1]", "", {"starting with '{'", "\"[1]\""}); }
  SECTION("truncated JSON") { require_corrupt(R"({"a":)", "", {"not valid UTF-8 JSON"}); }
  SECTION("invalid UTF-8 in a name") {
    require_corrupt("{\"\xff\":1}", "", {"not valid UTF-8 JSON", "ill-formed UTF-8"});
  }
  SECTION("trailing garbage") { require_corrupt("{}x", "", {"not valid UTF-8 JSON"}); }
  SECTION("NUL padding instead of spaces") {
    require_corrupt(std::string("{}") + std::string(6, '\0'), "", {"NUL byte at header offset 2", "padded with spaces"});
  }
  SECTION("nested 100,000 deep") {
    require_corrupt("{\"a\":" + std::string(100'000, '[') + std::string(100'000, ']') + "}", "",
                    {"header nests deeper than 64 levels (at byte 68)"});
  }
}

TEST_CASE("safetensors: rejects duplicate keys that nlohmann would silently merge", "[io]") {
  SECTION("tensor name twice") {
    require_corrupt(R"({"a":)" + kF32Entry + R"(,"a":)" + kF32Entry + "}", std::string(8, '\0'),
                    {"tensor name 'a' twice", "unique"});
  }
  SECTION("field twice inside one entry") {
    require_corrupt(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'),
                    {"\"dtype\" twice"});
  }
}

TEST_CASE("safetensors: rejects malformed tensor entries", "[io]") {
  const std::string data(8, '\0');
  const std::string exact_keys = "exactly the keys \"dtype\", \"shape\", \"data_offsets\"";
  SECTION("entry not an object") { require_corrupt(R"({"a":5})", "", {"tensor 'a'", exact_keys, "but is 5"}); }
  SECTION("a huge malformed entry is cut short in the message") {
    std::string zeros = "[0";
    for (int i = 0; i < 10'000; ++i) zeros += ",0";
    TempDir dir;
    write_raw(dir / "big.safetensors", file_bytes(R"({"a":)" + zeros + "]}"));
    try {
      SafetensorsFile::open(dir / "big.safetensors");
      FAIL("open() accepted a malformed entry");
    } catch (const tessera::FormatError& error) {
      CHECK_THAT(error.what(), Contains("but is [0,0,0") && Contains("..."));
      CHECK(std::string(error.what()).size() < 600);
    }
  }
  SECTION("missing key") { require_corrupt(R"({"a":{"dtype":"F32","shape":[2]}})", data, {"tensor 'a'", exact_keys}); }
  SECTION("extra key") {
    require_corrupt(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", data,
                    {"tensor 'a'", exact_keys, "\"extra\""});
  }
  SECTION("unknown dtype") {
    require_corrupt(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", std::string(2, '\0'),
                    {"tensor 'a'", "\"F8_E4M3\"", "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL"});
  }
  SECTION("dtype not a string") {
    require_corrupt(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", data, {"tensor 'a' has dtype 4"});
  }
  for (const std::string shape : {"2", "[-2]", "[2.0]", "[\"2\"]", "[9223372036854775808]", "null"}) {
    DYNAMIC_SECTION("shape " << shape) {
      require_corrupt(R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,8]}})", data,
                      {"tensor 'a' has shape " + shape, "list of non-negative integers"});
    }
  }
  for (const std::string offsets : {"[0]", "[0,8,8]", "[-1,8]", "[8,0]", "[0,8.5]", "\"0-8\""}) {
    DYNAMIC_SECTION("data_offsets " << offsets) {
      require_corrupt(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":)" + offsets + "}}", data,
                      {"tensor 'a' has data_offsets " + offsets, "two non-negative integers with begin <= end"});
    }
  }
  SECTION("shape whose byte count overflows") {
    require_corrupt(R"({"a":{"dtype":"U8","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", "",
                    {"tensor 'a'", "[4611686018427387904, 4]", "overflows 64 bits"});
  }
}

TEST_CASE("safetensors: rejects offsets that disagree with dtype, shape or buffer", "[io]") {
  SECTION("byte count differs from numel * dtype size") {
    require_corrupt(R"({"model.norm.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,10]}})", std::string(10, '\0'),
                    {"tensor 'model.norm.weight' has data_offsets [0, 10] = 10 bytes",
                     "dtype F32 with shape [4] needs 16 bytes", "corrupt"});
  }
  SECTION("offsets past the data buffer") {
    require_corrupt(R"({"a":)" + kF32Entry + "}", std::string(4, '\0'),
                    {"tensor 'a' has data_offsets [0, 8]", "data buffer is only 4 bytes"});
  }
  SECTION("gap between tensors") {
    require_corrupt(R"({"a":)" + kF32Entry + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                    std::string(20, '\0'), {"gap", "bytes [8, 12)", "tensor 'a'", "tensor 'b'"});
  }
  SECTION("overlapping tensors") {
    require_corrupt(R"({"a":)" + kF32Entry + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    std::string(12, '\0'), {"tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a'"});
  }
  SECTION("a zero-size tensor inside another tensor") {
    require_corrupt(R"({"a":)" + kF32Entry + R"(,"z":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
                    std::string(8, '\0'), {"tensor 'z' (data_offsets [4, 4]) overlaps tensor 'a'"});
  }
  SECTION("first tensor not at byte 0") {
    require_corrupt(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0'),
                    {"tensor 'a'", "must start at byte 0", "bytes [0, 4)"});
  }
  SECTION("bytes after the last tensor") {
    require_corrupt(R"({"a":)" + kF32Entry + "}", std::string(10, '\0'),
                    {"data buffer is 10 bytes", "end at byte 8", "[8, 10)", "belong to no tensor"});
  }
  SECTION("data but no tensors") {
    require_corrupt("{}", std::string(3, '\0'), {"data buffer is 3 bytes", "end at byte 0"});
  }
}

TEST_CASE("safetensors: rejects __metadata__ that is not an object of strings", "[io]") {
  SECTION("not an object") { require_corrupt(R"({"__metadata__":"pt"})", "", {"\"__metadata__\"", "string: \"pt\""}); }
  SECTION("non-string value") {
    require_corrupt(R"({"__metadata__":{"format":"pt","epoch":3}})", "", {"\"__metadata__\"", "key 'epoch'", "3"});
  }
}

TEST_CASE("safetensors: a failed write leaves nothing behind", "[io]") {
  TempDir dir;
  const auto four_floats = bytes_of<float>({1, 2, 3, 4});
  const auto ten_bytes = std::vector<std::byte>(10);
  const fs::path path = dir / "out.safetensors";
  const auto require_write_fails = [&](const fs::path& target, std::vector<TensorView> tensors,
                                       std::initializer_list<std::string> fragments) {
    std::string message;
    try {
      write_safetensors(target, tensors);
    } catch (const tessera::FormatError& error) {
      message = error.what();
    }
    INFO("message: " << message);
    REQUIRE_FALSE(message.empty());
    CHECK_THAT(message, Contains(target.string()));
    for (const auto& fragment : fragments) CHECK_THAT(message, Contains(fragment));
  };

  SECTION("data size differs from dtype and shape") {
    require_write_fails(path, {{"ok", StDType::F32, {4}, four_floats}, {"bad", StDType::F32, {4}, ten_bytes}},
                        {"tensor 'bad'", "dtype F32 with shape [4] needs 16 bytes but 10 bytes"});
    CHECK(entries(dir.path()).empty());
  }
  SECTION("duplicate name") {
    require_write_fails(path, {{"w", StDType::F32, {4}, four_floats}, {"w", StDType::F32, {4}, four_floats}},
                        {"tensor 'w'", "appears twice"});
    CHECK(entries(dir.path()).empty());
  }
  SECTION("reserved name") {
    require_write_fails(path, {{"__metadata__", StDType::F32, {4}, four_floats}}, {"reserved"});
    CHECK(entries(dir.path()).empty());
  }
  SECTION("negative dimension") {
    require_write_fails(path, {{"w", StDType::F32, {-4}, four_floats}}, {"shape [-4]", "negative"});
    CHECK(entries(dir.path()).empty());
  }
  SECTION("invalid UTF-8 name") {
    require_write_fails(path, {{"\xff", StDType::F32, {4}, four_floats}}, {"not valid UTF-8"});
    CHECK(entries(dir.path()).empty());
  }
  SECTION("parent path runs through a regular file") {
    write_raw(dir / "blocker", "not a directory");
    require_write_fails(dir / "blocker" / "out.safetensors", {{"w", StDType::F32, {4}, four_floats}},
                        {"cannot create the temporary file"});
    CHECK(entries(dir.path()) == std::vector<std::string>{"blocker"});
    CHECK(read_raw(dir / "blocker") == "not a directory");
  }
  SECTION("a failed overwrite keeps the old file") {
    const std::vector<TensorView> old{{"w", StDType::F32, {4}, four_floats}};
    write_safetensors(path, old);
    const std::string before = read_raw(path);
    require_write_fails(path, {{"w", StDType::F32, {4}, ten_bytes}}, {"needs 16 bytes"});
    CHECK(read_raw(path) == before);
    CHECK(entries(dir.path()) == std::vector<std::string>{"out.safetensors"});
  }
}

TEST_CASE("safetensors: overwriting replaces the file and moved-from handles keep mappings valid", "[io]") {
  TempDir dir;
  const fs::path path = dir / "w.safetensors";
  const auto first = bytes_of<std::int32_t>({1, 2});
  const auto second = bytes_of<std::int32_t>({3, 4, 5});
  write_safetensors(path, std::vector<TensorView>{{"a", StDType::I32, {2}, first}});
  auto opened = SafetensorsFile::open(path);
  write_safetensors(path, std::vector<TensorView>{{"b", StDType::I32, {3}, second}});
  CHECK(entries(dir.path()) == std::vector<std::string>{"w.safetensors"});

  // The earlier mapping still shows the old file: rename() replaced the name, not the bytes.
  SafetensorsFile moved = std::move(opened);
  CHECK(as_string(moved.bytes(*moved.find("a"))) == as_string(first));
  moved = SafetensorsFile::open(path);
  CHECK(moved.find("a") == nullptr);
  CHECK(as_string(moved.bytes(*moved.find("b"))) == as_string(second));
}
