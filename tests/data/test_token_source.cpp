// tests: tessera::data::TokenSource — llm.c and raw file formats byte for byte, their errors,
// and the synthetic generator's determinism and structure.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/data/token_source.hpp"

namespace fs = std::filesystem;
using tessera::FormatError;
using tessera::data::TokenSource;

namespace {

// A fresh directory per test case, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("tessera_ts_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path write(const std::string& name, const std::vector<unsigned char>& bytes) const {
    const fs::path p = path / name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return p;
  }
};

// Little-endian encodings written out byte by byte, independent of the host.
void put_i32(std::vector<unsigned char>& out, std::int32_t v) {
  const auto u = static_cast<std::uint32_t>(v);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(u >> (8 * i)));
}
void put_u16(std::vector<unsigned char>& out, std::uint16_t v) {
  out.push_back(static_cast<unsigned char>(v & 0xFF));
  out.push_back(static_cast<unsigned char>(v >> 8));
}

// llm.c header (magic, version, n, then 253 zero int32) followed by `tokens`.
std::vector<unsigned char> llmc_bytes(std::int32_t version, std::int32_t n, const std::vector<std::uint16_t>& tokens) {
  std::vector<unsigned char> out;
  put_i32(out, 20240520);
  put_i32(out, version);
  put_i32(out, n);
  for (int i = 3; i < 256; ++i) put_i32(out, 0);
  for (auto t : tokens) put_u16(out, t);
  return out;
}

std::vector<std::uint16_t> as_vector(const TokenSource& s) { return {s.tokens().begin(), s.tokens().end()}; }

}  // namespace

TEST_CASE("llm.c file: header then little-endian uint16 tokens", "[data]") {
  TempDir dir;
  const std::vector<std::uint16_t> toks = {1, 258, 65535, 0, 50256};
  auto bytes = llmc_bytes(1, 5, toks);
  REQUIRE(bytes.size() == 1024 + 10);
  // Exact layout: 258 = 0x0102 is stored low byte first.
  CHECK(bytes[0] == 0x88);  // 20240520 = 0x0134D888
  CHECK(bytes[1] == 0xD8);
  CHECK(bytes[2] == 0x34);
  CHECK(bytes[3] == 0x01);
  CHECK(bytes[1026] == 0x02);
  CHECK(bytes[1027] == 0x01);
  const auto path = dir.write("x.bin", bytes);

  const auto src = TokenSource::open(path);
  CHECK(src.size() == 5);
  CHECK(as_vector(src) == toks);
  CHECK(src.max_token() == 65535);
  CHECK(src.description() == "llm.c file " + path.string() + " (5 tokens)");
}

TEST_CASE("raw nanoGPT file: every byte pair is a token", "[data]") {
  TempDir dir;
  const auto path = dir.write("raw.bin", {0x01, 0x00, 0x02, 0x01, 0xFF, 0xFF, 0x34, 0x12});
  const auto src = TokenSource::open(path);
  CHECK(as_vector(src) == std::vector<std::uint16_t>{1, 258, 65535, 0x1234});
  CHECK(src.max_token() == 65535);
  CHECK(src.description() == "raw uint16 file " + path.string() + " (4 tokens)");
}

TEST_CASE("format detection keys on the exact magic", "[data]") {
  TempDir dir;
  SECTION("a near-miss first int32 (magic + 1) is raw data") {
    auto bytes = llmc_bytes(1, 5, {1, 2, 3, 4, 5});
    bytes[0] = 0x89;  // 20240521
    const auto src = TokenSource::open(dir.write("near.bin", bytes));
    CHECK(src.size() == bytes.size() / 2);
    CHECK(src.tokens()[0] == 0xD889);
    CHECK(std::string(src.description()).rfind("raw uint16 file", 0) == 0);
  }
  SECTION("a raw file whose first two tokens spell the magic is by definition llm.c, and refused") {
    // Tokens 0xD888, 0x0134 are the magic's little-endian halves; the rest is no valid header.
    std::vector<unsigned char> bytes;
    for (std::uint16_t t : {0xD888, 0x0134, 1, 0, 7, 0}) put_u16(bytes, t);
    REQUIRE_THROWS_AS(TokenSource::open(dir.write("spells.bin", bytes)), FormatError);
    REQUIRE_THROWS_WITH(TokenSource::open(dir.write("spells.bin", bytes)), Catch::Contains("1024-byte llm.c header"));
  }
}

TEST_CASE("malformed token files throw FormatError naming the file", "[data]") {
  TempDir dir;
  using Catch::Contains;
  SECTION("llm.c version other than 1") {
    const auto p = dir.write("v2.bin", llmc_bytes(2, 2, {1, 2}));
    REQUIRE_THROWS_AS(TokenSource::open(p), FormatError);
    REQUIRE_THROWS_WITH(TokenSource::open(p), Contains(p.string()) && Contains("version 2") && Contains("version 1"));
  }
  SECTION("llm.c size does not match the header's count") {
    const auto p = dir.write("short.bin", llmc_bytes(1, 5, {1, 2, 3}));  // 1030 bytes, header wants 1034
    REQUIRE_THROWS_AS(TokenSource::open(p), FormatError);
    REQUIRE_THROWS_WITH(TokenSource::open(p), Contains(p.string()) && Contains("1034") && Contains("1030"));
  }
  SECTION("llm.c negative count") {
    const auto p = dir.write("neg.bin", llmc_bytes(1, -1, {}));
    REQUIRE_THROWS_AS(TokenSource::open(p), FormatError);
  }
  SECTION("llm.c with zero tokens") {
    const auto p = dir.write("zero.bin", llmc_bytes(1, 0, {}));
    REQUIRE_THROWS_WITH(TokenSource::open(p), Contains(p.string()) && Contains("0 tokens"));
  }
  SECTION("raw file with an odd byte count") {
    const auto p = dir.write("odd.bin", {1, 0, 2});
    REQUIRE_THROWS_AS(TokenSource::open(p), FormatError);
    REQUIRE_THROWS_WITH(TokenSource::open(p), Contains(p.string()) && Contains("3 bytes") && Contains("odd"));
  }
  SECTION("empty file") {
    const auto p = dir.write("empty.bin", {});
    REQUIRE_THROWS_AS(TokenSource::open(p), FormatError);
    REQUIRE_THROWS_WITH(TokenSource::open(p), Contains(p.string()) && Contains("empty"));
  }
  SECTION("missing file") {
    const auto p = dir.path / "does_not_exist.bin";
    REQUIRE_THROWS_AS(TokenSource::open(p), FormatError);
    REQUIRE_THROWS_WITH(TokenSource::open(p), Contains(p.string()));
  }
  SECTION("a directory") {
    REQUIRE_THROWS_AS(TokenSource::open(dir.path), FormatError);
  }
  SECTION("a FIFO is refused at once, not waited on") {
    const auto p = dir.path / "fifo.bin";
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    REQUIRE_THROWS_WITH(TokenSource::open(p), Contains(p.string()) && Contains("not a regular file"));
  }
}

TEST_CASE("TokenSource moves keep the mapped tokens valid", "[data]") {
  TempDir dir;
  auto a = TokenSource::open(dir.write("m.bin", {5, 0, 6, 0}));
  TokenSource b = std::move(a);
  CHECK(as_vector(b) == std::vector<std::uint16_t>{5, 6});
  auto c = TokenSource::synthetic(10, 100, 1);
  c = std::move(b);  // releases c's generated tokens, takes b's mapping
  CHECK(as_vector(c) == std::vector<std::uint16_t>{5, 6});
  CHECK(c.max_token() == 6);
}

TEST_CASE("synthetic tokens are deterministic and machine-independent", "[data]") {
  const auto a = TokenSource::synthetic(16, 50257, 42);
  // Golden values from tessera's own splitmix64 generator; a change here changes every
  // synthetic run's data, so update only deliberately.
  const std::vector<std::uint16_t> golden = {2814,  2868, 23195, 45817, 20582, 2160,  41493, 17521,
                                             28803, 38689, 8151, 9509,  45392, 31220, 3034,  43016};
  CHECK(as_vector(a) == golden);
  CHECK(a.description() == "synthetic (16 tokens, seed 42)");
  CHECK(as_vector(TokenSource::synthetic(16, 50257, 42)) == golden);
  CHECK(as_vector(TokenSource::synthetic(16, 50257, 43)) != golden);

  const auto big = TokenSource::synthetic(132097, 65, 7);
  CHECK(big.description() == "synthetic (132,097 tokens, seed 7)");
  const std::vector<std::uint16_t> first = {23, 27, 26, 4, 29, 26, 4, 31, 61, 24, 34, 36};
  CHECK(std::equal(first.begin(), first.end(), big.tokens().begin()));
}

TEST_CASE("synthetic tokens stay below the vocab and follow a successor 3/4 of the time", "[data]") {
  const std::uint32_t vocab = 64;
  const auto src = TokenSource::synthetic(200000, vocab, 3);
  CHECK(src.max_token() < vocab);
  // For each token, the most common next token is its successor: it should account for
  // about 3/4 + 1/4 * 1/vocab of all transitions (~0.754), far above uniform's 1/64.
  std::map<std::uint16_t, std::map<std::uint16_t, std::int64_t>> next;
  const auto t = src.tokens();
  for (std::size_t i = 0; i + 1 < t.size(); ++i) ++next[t[i]][t[i + 1]];
  std::int64_t best_total = 0;
  for (const auto& [prev, counts] : next) {
    std::int64_t best = 0;
    for (const auto& [tok, n] : counts) best = std::max(best, n);
    best_total += best;
  }
  const double frac = static_cast<double>(best_total) / static_cast<double>(t.size() - 1);
  CHECK(frac > 0.74);
  CHECK(frac < 0.77);
}

TEST_CASE("synthetic refuses impossible settings", "[data]") {
  CHECK_THROWS_AS(TokenSource::synthetic(0, 10, 1), tessera::ConfigError);
  CHECK_THROWS_AS(TokenSource::synthetic(10, 0, 1), tessera::ConfigError);
  CHECK_THROWS_WITH(TokenSource::synthetic(10, 65537, 1), Catch::Contains("65537"));
  CHECK(TokenSource::synthetic(1000, 65536, 1).size() == 1000);
}

TEST_CASE("ensure_unchanged notices a mapped file that changed size", "[data]") {
  TempDir dir;
  const auto p = dir.write("t.bin", {1, 0, 2, 0, 3, 0, 4, 0});
  const auto src = TokenSource::open(p);
  CHECK_NOTHROW(src.ensure_unchanged());
  std::filesystem::resize_file(p, 2);
  CHECK_THROWS_WITH(src.ensure_unchanged(), Catch::Contains(p.string()) && Catch::Contains("was 8 bytes, now 2"));
  CHECK_NOTHROW(TokenSource::synthetic(10, 100, 1).ensure_unchanged());
}
