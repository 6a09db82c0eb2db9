// tests: io/fingerprint.hpp: copies of a file or directory print alike whatever their paths; a changed byte at
// either end, another size, an entry more or a subdirectory's entry count print otherwise; hidden names and token
// caches are left out; what cannot be read says so.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "support.hpp"
#include "tessera/io/fingerprint.hpp"

using tessera::io::fingerprint;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

}  // namespace

TEST_CASE("fingerprint: a file by its size and both ends", "[io]") {
  const fs::path dir = tessera::testing::fresh_dir("fingerprint_file");
  const std::string big(200 << 10, 'x');  // beyond both 64 KiB ends
  write(dir / "a.bin", big);
  write(dir / "copy.bin", big);
  CHECK(fingerprint(dir / "a.bin") == fingerprint(dir / "copy.bin"));
  CHECK(fingerprint(dir / "a.bin").starts_with("204800 bytes, CRC-32C "));
  std::string last = big;
  last.back() = 'y';
  write(dir / "last.bin", last);
  std::string first = big;
  first.front() = 'y';
  write(dir / "first.bin", first);
  write(dir / "short.bin", big.substr(1));
  CHECK(fingerprint(dir / "last.bin") != fingerprint(dir / "a.bin"));
  CHECK(fingerprint(dir / "first.bin") != fingerprint(dir / "a.bin"));
  CHECK(fingerprint(dir / "short.bin") != fingerprint(dir / "a.bin"));
  CHECK(fingerprint(dir / "missing.bin").starts_with("cannot be read: "));
}

TEST_CASE("fingerprint: a directory by its entries, without hidden files and token caches", "[io]") {
  const fs::path root = tessera::testing::fresh_dir("fingerprint_dir");
  for (const char* name : {"a", "b"}) {
    fs::create_directories(root / name / "cats");
    write(root / name / "config.json", "{\"hidden_size\": 8}");
    write(root / name / "cats" / "1.jpg", "jpeg");
  }
  CHECK(fingerprint(root / "a") == fingerprint(root / "b"));
  CHECK(fingerprint(root / "a").starts_with("2 entries, CRC-32C "));
  write(root / "b" / ".tessera-lock", "");
  write(root / "b" / "train.txt.sp-1234abcd.tokens", "cache");
  CHECK(fingerprint(root / "a") == fingerprint(root / "b"));
  write(root / "b" / "cats" / "2.jpg", "jpeg");
  CHECK(fingerprint(root / "a") != fingerprint(root / "b"));
  fs::remove(root / "b" / "cats" / "2.jpg");
  write(root / "b" / "config.json", "{\"hidden_size\": 9}");
  CHECK(fingerprint(root / "a") != fingerprint(root / "b"));
}
