// tests: tessera::data::BatchOrder — row layout, world-size invariance, accumulation order,
// wrap-around, num_train_samples / limit_train_batches, and its error messages.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/data/batch_order.hpp"

namespace fs = std::filesystem;
using tessera::ConfigError;
using tessera::data::BatchOrder;
using tessera::data::BatchShape;
using tessera::data::TokenSource;

namespace {

// A raw token file whose token i is i, so every id read names its own position.
struct CountingFile {
  fs::path path;
  TokenSource src;
  explicit CountingFile(std::uint16_t n) : path(write(n)), src(TokenSource::open(path)) {}
  ~CountingFile() { fs::remove(path); }
  static fs::path write(std::uint16_t n) {
    static int counter = 0;
    const fs::path p = fs::temp_directory_path() /
                       ("tessera_bo_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".bin");
    std::vector<std::uint16_t> ids(n);
    std::iota(ids.begin(), ids.end(), std::uint16_t{0});
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(2 * n));
    return p;
  }
};

struct Rows {
  std::vector<std::int64_t> inputs, targets;
  bool operator==(const Rows&) const = default;
};

Rows fill(const BatchOrder& order, const BatchShape& shape, std::int64_t step, std::int64_t micro, std::int64_t rank) {
  Rows r{std::vector<std::int64_t>(shape.batch_size * shape.seq_len), std::vector<std::int64_t>(shape.batch_size * shape.seq_len)};
  order.fill(step, micro, rank, r.inputs, r.targets);
  return r;
}

// All ranks' rows of one micro-step, rank 0 first: the global [G, T] batch.
Rows global_rows(const BatchOrder& order, const BatchShape& shape, std::int64_t step, std::int64_t micro) {
  Rows all;
  for (std::int64_t k = 0; k < shape.world_size; ++k) {
    const Rows r = fill(order, shape, step, micro, k);
    all.inputs.insert(all.inputs.end(), r.inputs.begin(), r.inputs.end());
    all.targets.insert(all.targets.end(), r.targets.begin(), r.targets.end());
  }
  return all;
}

std::vector<std::int64_t> range(std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> v(count);
  std::iota(v.begin(), v.end(), first);
  return v;
}

}  // namespace

TEST_CASE("rank rows: inputs at chunk start + row*T, targets shifted by one", "[data]") {
  CountingFile f(100);
  const BatchShape shape{.world_size = 2, .batch_size = 2, .seq_len = 3, .accumulate = 1};
  const BatchOrder order(f.src, shape);
  CHECK(order.chunks_per_epoch() == 8);  // (100-1) / (2*2*3)
  CHECK(order.chunk_start_token(1, 0) == 12);
  // Step 1 = chunk 1 at token 12; rank 1 holds rows 2, 3 = tokens 18..23.
  const Rows r = fill(order, shape, 1, 0, 1);
  CHECK(r.inputs == range(18, 6));
  CHECK(r.targets == range(19, 6));
  CHECK(fill(order, shape, 1, 0, 0).inputs == range(12, 6));
}

TEST_CASE("the global batch order does not depend on world_size", "[data]") {
  const auto src = TokenSource::synthetic(5000, 1000, 11);
  const std::int64_t T = 16, A = 2;
  const BatchShape one{.world_size = 1, .batch_size = 8, .seq_len = T, .accumulate = A};
  const BatchOrder reference(src, one);
  REQUIRE(reference.chunks_per_epoch() == 39);  // (5000-1) / 128
  for (std::int64_t W : {2, 4}) {
    const BatchShape shape{.world_size = W, .batch_size = 8 / W, .seq_len = T, .accumulate = A};
    const BatchOrder order(src, shape);
    CHECK(order.chunks_per_epoch() == reference.chunks_per_epoch());
    CHECK(order.steps_per_epoch() == reference.steps_per_epoch());
    // Two epochs and a bit, so wrap-around is covered too.
    for (std::int64_t step = 0; step < 2 * order.steps_per_epoch() + 3; ++step) {
      for (std::int64_t m = 0; m < A; ++m) {
        INFO("W=" << W << " step=" << step << " micro=" << m);
        CHECK(global_rows(order, shape, step, m) == global_rows(reference, one, step, m));
      }
    }
  }
}

TEST_CASE("accumulation: step s, micro m reads chunk s*A + m", "[data]") {
  CountingFile f(1000);
  const BatchShape acc{.world_size = 2, .batch_size = 2, .seq_len = 5, .accumulate = 3};
  BatchShape flat = acc;
  flat.accumulate = 1;
  const BatchOrder order(f.src, acc), single(f.src, flat);
  REQUIRE(order.chunks_per_epoch() == 49);  // (1000-1) / 20
  CHECK(order.steps_per_epoch() == 16);
  for (std::int64_t s = 0; s < 40; ++s) {
    for (std::int64_t m = 0; m < 3; ++m) {
      CHECK(order.chunk_start_token(s, m) == ((s * 3 + m) % 49) * 20);
      CHECK(global_rows(order, acc, s, m) == global_rows(single, flat, s * 3 + m, 0));
    }
  }
}

TEST_CASE("chunks wrap to the start when fewer than G*T+1 tokens are left", "[data]") {
  const BatchShape shape{.world_size = 1, .batch_size = 2, .seq_len = 4, .accumulate = 1};  // G*T = 8
  SECTION("5 tokens left over after 3 chunks") {
    CountingFile f(30);
    const BatchOrder order(f.src, shape);
    CHECK(order.chunks_per_epoch() == 3);
    CHECK(order.chunk_start_token(2, 0) == 16);
    CHECK(order.chunk_start_token(3, 0) == 0);
    CHECK(order.chunk_start_token(7, 0) == 8);
    CHECK(fill(order, shape, 3, 0, 0) == fill(order, shape, 0, 0, 0));
  }
  SECTION("exactly 3*G*T+1 tokens: the last chunk's last target is the last token") {
    CountingFile f(25);
    const BatchOrder order(f.src, shape);
    CHECK(order.chunks_per_epoch() == 3);
    CHECK(fill(order, shape, 2, 0, 0).targets.back() == 24);
  }
  SECTION("one token short of a third chunk") {
    CountingFile f(24);
    CHECK(BatchOrder(f.src, shape).chunks_per_epoch() == 2);
  }
}

TEST_CASE("num_train_samples caps the tokens an epoch uses", "[data]") {
  CountingFile f(1000);
  const BatchShape shape{.world_size = 1, .batch_size = 2, .seq_len = 4, .accumulate = 1};  // G*T = 8
  CHECK(BatchOrder(f.src, shape).chunks_per_epoch() == 124);
  CHECK(BatchOrder(f.src, shape, 100000).chunks_per_epoch() == 124);  // more than the file holds
  const BatchOrder capped(f.src, shape, 10);                          // U = 10*4 + 1 = 41 tokens
  CHECK(capped.chunks_per_epoch() == 5);
  CHECK(fill(capped, shape, 4, 0, 0).targets.back() == 40);  // never reads past token U-1
  CHECK(capped.chunk_start_token(5, 0) == 0);
  CHECK_THROWS_WITH(BatchOrder(f.src, shape, 1), Catch::Contains("num_train_samples=1 keeps 5"));
  CHECK_THROWS_AS(BatchOrder(f.src, shape, 0), ConfigError);
  CHECK_THROWS_AS(BatchOrder(f.src, shape, -2), ConfigError);
}

TEST_CASE("limit_train_batches shortens the epoch, keeping at least one micro-batch", "[data]") {
  CountingFile f(1000);
  const BatchShape shape{.world_size = 1, .batch_size = 2, .seq_len = 4, .accumulate = 1};  // 124 chunks
  CHECK(BatchOrder(f.src, shape, -1, 1.0).chunks_per_epoch() == 124);
  CHECK(BatchOrder(f.src, shape, -1, 0.5).chunks_per_epoch() == 62);
  CHECK(BatchOrder(f.src, shape, -1, 0.1).chunks_per_epoch() == 12);  // floor(12.4)
  CHECK(BatchOrder(f.src, shape, -1, 0.001).chunks_per_epoch() == 1);
  CHECK(BatchOrder(f.src, shape, 10, 0.5).chunks_per_epoch() == 2);  // floor(5 * 0.5)
  const BatchOrder half(f.src, shape, -1, 0.5);
  CHECK(half.chunk_start_token(62, 0) == 0);
  for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
    CHECK_THROWS_AS(BatchOrder(f.src, shape, -1, bad), ConfigError);
  }
}

TEST_CASE("too short a file names its size and what one micro-step needs", "[data]") {
  CountingFile f(5);
  const BatchShape shape{.world_size = 2, .batch_size = 2, .seq_len = 2, .accumulate = 1};
  using Catch::Contains;
  CHECK_THROWS_AS(BatchOrder(f.src, shape), ConfigError);
  CHECK_THROWS_WITH(BatchOrder(f.src, shape),
                    Contains(f.path.string()) && Contains("has 5 tokens") && Contains("G*T+1 = 9") &&
                        Contains("world_size*batch_size*seq_len+1 = 2*2*2+1") && Contains("smaller batch_size or seq_len") &&
                        Contains("longer token file"));
  // 9 tokens are exactly one micro-step.
  CountingFile g(9);
  CHECK(BatchOrder(g.src, shape).chunks_per_epoch() == 1);
}

TEST_CASE("accumulate_grad_batches larger than the epoch is refused", "[data]") {
  CountingFile f(41);
  const BatchShape shape{.world_size = 1, .batch_size = 2, .seq_len = 4, .accumulate = 6};  // 5 chunks
  CHECK_THROWS_AS(BatchOrder(f.src, shape), ConfigError);
  CHECK_THROWS_WITH(BatchOrder(f.src, shape), Catch::Contains("accumulate_grad_batches=6") && Catch::Contains("5 micro-batches"));
  BatchShape fits = shape;
  fits.accumulate = 5;
  CHECK(BatchOrder(f.src, fits).steps_per_epoch() == 1);
}

TEST_CASE("total_steps: max_steps wins, else max_epochs * steps_per_epoch", "[data]") {
  CountingFile f(1000);
  const BatchShape shape{.world_size = 1, .batch_size = 2, .seq_len = 4, .accumulate = 4};  // 124 chunks
  const BatchOrder order(f.src, shape);
  CHECK(order.steps_per_epoch() == 31);
  CHECK(order.total_steps(3, -1) == 93);
  CHECK(order.total_steps(3, 0) == 93);
  CHECK(order.total_steps(3, 10) == 10);
  CHECK(order.total_steps(0, 500) == 500);
  CHECK_THROWS_AS(order.total_steps(0, -1), ConfigError);
}

TEST_CASE("bad shapes and fill arguments are refused", "[data]") {
  CountingFile f(1000);
  for (BatchShape bad : {BatchShape{.world_size = 0}, BatchShape{.batch_size = 0}, BatchShape{.seq_len = 0},
                         BatchShape{.accumulate = 0}}) {
    CHECK_THROWS_AS(BatchOrder(f.src, bad), ConfigError);
  }
  const BatchShape shape{.world_size = 2, .batch_size = 2, .seq_len = 4, .accumulate = 2};
  const BatchOrder order(f.src, shape);
  std::vector<std::int64_t> in(8), out(8), small(7);
  CHECK_NOTHROW(order.fill(0, 1, 1, in, out));
  CHECK_THROWS_AS(order.fill(0, 0, 0, small, out), std::invalid_argument);
  CHECK_THROWS_AS(order.fill(0, 0, 0, in, small), std::invalid_argument);
  CHECK_THROWS_AS(order.fill(0, 0, 2, in, out), std::invalid_argument);
  CHECK_THROWS_AS(order.fill(0, 2, 0, in, out), std::invalid_argument);
  CHECK_THROWS_AS(order.fill(-1, 0, 0, in, out), std::invalid_argument);
  CHECK_THROWS_AS(order.chunk_start_token(0, -1), std::invalid_argument);
}

TEST_CASE("products that overflow 64 bits are refused, naming the keys", "[data]") {
  CountingFile f(1000);
  const BatchShape shape{.world_size = 1, .batch_size = 2, .seq_len = 4, .accumulate = 4};
  const BatchOrder order(f.src, shape);
  CHECK_THROWS_WITH(order.total_steps(INT64_MAX, -1), Catch::Contains("max_epochs=9223372036854775807") &&
                                                          Catch::Contains("overflows 64 bits"));
  const BatchShape huge{.world_size = 1 << 20, .batch_size = 1 << 20, .seq_len = 1 << 20, .accumulate = 1 << 20};
  CHECK_THROWS_WITH(BatchOrder(f.src, huge), Catch::Contains("tokens per step overflows 64 bits"));
}

TEST_CASE("a token file truncated during training is an error, not a SIGBUS", "[data]") {
  CountingFile f(4096);
  const BatchShape shape{.world_size = 1, .batch_size = 2, .seq_len = 4, .accumulate = 1};
  const BatchOrder order(f.src, shape);
  std::vector<std::int64_t> in(8), out(8);
  order.fill(400, 0, 0, in, out);  // reads near byte 6400
  fs::resize_file(f.path, 100);    // another process cuts the file short: those pages are gone
  CHECK_THROWS_AS(order.fill(400, 0, 0, in, out), tessera::FormatError);
  CHECK_THROWS_WITH(order.fill(0, 0, 0, in, out), Catch::Contains("changed size while training read it (was 8,192 bytes, now 100)"));
}
