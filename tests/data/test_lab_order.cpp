// tests: tessera::data's lab row orders (data/lab_order.hpp): fixed vectors taken from numpy 2.3.5, datasets 5.2.0
// and torch 2.11 themselves, the properties every order must have (a permutation, ranks that partition the padded
// set), and the argument errors. tests/reference/check_lab_order.py compares thousands more against the libraries.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/data/lab_order.hpp"

using tessera::ConfigError;
using namespace tessera::data;
using Rows = std::vector<std::int64_t>;

namespace {

constexpr std::uint64_t kMaxSeed = std::numeric_limits<std::uint64_t>::max();

bool is_permutation_of_n(Rows rows, std::int64_t n) {
  if (static_cast<std::int64_t>(rows.size()) != n) return false;
  std::sort(rows.begin(), rows.end());
  Rows iota(rows.size());
  std::iota(iota.begin(), iota.end(), std::int64_t{0});
  return rows == iota;
}

}  // namespace

TEST_CASE("lab_order: numpy_permutation matches numpy default_rng permutation", "[data][lab_order]") {
  // np.random.default_rng(seed).permutation(n).tolist()
  CHECK(numpy_permutation(42, 10) == Rows{5, 6, 0, 7, 3, 2, 4, 9, 1, 8});
  CHECK(numpy_permutation(0, 10) == Rows{4, 6, 2, 7, 3, 5, 9, 0, 8, 1});
  CHECK(numpy_permutation(1, 12) == Rows{8, 11, 4, 7, 5, 0, 1, 9, 2, 10, 6, 3});
  CHECK(numpy_permutation(std::uint64_t{1} << 32, 7) == Rows{1, 3, 6, 0, 4, 2, 5});  // two seed words
  CHECK(numpy_permutation(kMaxSeed, 10) == Rows{8, 7, 3, 0, 4, 6, 1, 2, 5, 9});
  const Rows big = numpy_permutation(42, 100000);  // many buffered 32-bit draws, masks up to 2^17 - 1
  CHECK(Rows(big.begin(), big.begin() + 5) == Rows{45262, 49850, 30394, 90177, 95569});
  CHECK(Rows(big.end() - 3, big.end()) == Rows{5668, 22113, 75400});
  CHECK(is_permutation_of_n(big, 100000));
}

TEST_CASE("lab_order: numpy_permutation of 0 and 1 rows draws nothing", "[data][lab_order]") {
  CHECK(numpy_permutation(42, 0).empty());
  CHECK(numpy_permutation(42, 1) == Rows{0});
  for (const std::int64_t n : {2, 3, 31, 32, 33, 1025}) CHECK(is_permutation_of_n(numpy_permutation(7, n), n));
}

TEST_CASE("lab_order: numpy_train_test_split is litgpt Alpaca2k split", "[data][lab_order]") {
  // Dataset.from_dict({"i": range(2000)}).train_test_split(test_size=0.05, seed=42): the test rows are the
  // permutation's first ceil(0.05 * 2000) = 100, the train rows the rest.
  const auto split = numpy_train_test_split(2000, 0.05, 42);
  REQUIRE(split.test.size() == 100);
  REQUIRE(split.train.size() == 1900);
  CHECK(Rows(split.test.begin(), split.test.begin() + 8) == Rows{1631, 285, 1268, 747, 390, 166, 656, 260});
  CHECK(Rows(split.train.begin(), split.train.begin() + 8) == Rows{1533, 1222, 595, 606, 150, 771, 598, 1384});
  Rows joined = split.test;
  joined.insert(joined.end(), split.train.begin(), split.train.end());
  CHECK(joined == numpy_permutation(42, 2000));
}

TEST_CASE("lab_order: numpy_train_test_split rounds the test rows up in double", "[data][lab_order]") {
  CHECK(numpy_train_test_split(100, 0.07, 3).test.size() == 8);  // 0.07 * 100 = 7.000000000000001 in double
  CHECK(numpy_train_test_split(10, 0.1, 0).test.size() == 1);
  CHECK(numpy_train_test_split(2, 0.5, 0).test.size() == 1);
}

TEST_CASE("lab_order: numpy_train_test_split refuses a bad test_size or an empty split", "[data][lab_order]") {
  for (const double bad : {0.0, 1.0, 1.5, -0.1, std::numeric_limits<double>::quiet_NaN()})
    CHECK_THROWS_WITH(numpy_train_test_split(10, bad, 0), Catch::Contains("is outside (0, 1)"));
  CHECK_THROWS_WITH(numpy_train_test_split(1, 0.5, 0), Catch::Contains("empty train split"));
  CHECK_THROWS_WITH(numpy_train_test_split(5, 0.9, 0), Catch::Contains("ceil(test_size*n) = 5"));
  CHECK_THROWS_WITH(numpy_train_test_split(0, 0.5, 0), Catch::Contains("n=0 rows"));
  CHECK_THROWS_AS(numpy_train_test_split(-3, 0.5, 0), ConfigError);
}

TEST_CASE("lab_order: torch_randperm matches torch randperm with a seeded generator", "[data][lab_order]") {
  CHECK(torch_randperm(10, 42) == Rows{2, 6, 1, 8, 4, 5, 0, 9, 3, 7});
  CHECK(torch_randperm(10, 1) == Rows{5, 6, 1, 2, 0, 8, 9, 3, 7, 4});
  CHECK(torch_randperm(10, (std::uint64_t{1} << 32) + 42) == torch_randperm(10, 42));  // mt19937: low 32 bits
  CHECK(torch_randperm(0, 3).empty());
  CHECK(is_permutation_of_n(torch_randperm(1000, kMaxSeed), 1000));
}

TEST_CASE("lab_order: TorchShuffledEpochs matches a seeded shuffled DataLoader epoch by epoch", "[data][lab_order]") {
  // DataLoader(range 10, batch_size=4, shuffle=True, generator=Generator().manual_seed(42)), epochs 0..3.
  const std::vector<Rows> want{{6, 5, 4, 0, 8, 9, 2, 1, 3, 7},
                               {3, 6, 5, 8, 9, 4, 2, 0, 7, 1},
                               {7, 4, 5, 0, 9, 1, 3, 2, 8, 6},
                               {0, 8, 1, 5, 7, 3, 9, 2, 6, 4}};
  TorchShuffledEpochs loader(10, 42, 4, false);
  TorchShuffledEpochs dropping(10, 42, 4, true);
  for (std::size_t e = 0; e < want.size(); ++e) {
    CHECK(loader.next_epoch() == want[e]);
    CHECK(dropping.next_epoch() == Rows(want[e].begin(), want[e].begin() + 8));  // drop_last: 2 batches of 4
    CHECK(dataloader_epoch_order(10, 42, static_cast<std::int64_t>(e), 4, false) == want[e]);
  }
  CHECK(loader.epochs_done() == 4);
  // The epoch's _base_seed draw comes first: epoch 0 is not randperm(n) of the fresh generator.
  CHECK(dataloader_epoch_order(10, 42, 0) != torch_randperm(10, 42));
  CHECK(TorchShuffledEpochs(3, 0, 8, true).next_epoch().empty());  // batch_size > n with drop_last: no batch
}

TEST_CASE("lab_order: TorchShuffledEpochs refuses an empty dataset, a bad batch_size or epoch", "[data][lab_order]") {
  CHECK_THROWS_WITH(TorchShuffledEpochs(0, 42, 4, false), Catch::Contains("n=0 rows"));
  CHECK_THROWS_WITH(TorchShuffledEpochs(10, 42, 0, false), Catch::Contains("batch_size=0"));
  CHECK_THROWS_WITH(dataloader_epoch_order(10, 42, -1), Catch::Contains("epoch=-1"));
}

TEST_CASE("lab_order: distributed_sampler_indices matches DistributedSampler", "[data][lab_order]") {
  // DistributedSampler(range 10, num_replicas=3, rank=r, seed=0) after set_epoch(1): randperm from seed 0 + 1,
  // padded with its first 2 rows to 12 (or cut to 9 with drop_last), rank r takes positions r, r+3, ...
  const std::vector<Rows> padded{{5, 2, 9, 4}, {6, 0, 3, 5}, {1, 8, 7, 6}};
  const std::vector<Rows> cut{{5, 2, 9}, {6, 0, 3}, {1, 8, 7}};
  for (std::int64_t r = 0; r < 3; ++r) {
    CHECK(distributed_sampler_indices(10, 3, r, 0, 1, true, false) == padded[static_cast<std::size_t>(r)]);
    CHECK(distributed_sampler_indices(10, 3, r, 0, 1, true, true) == cut[static_cast<std::size_t>(r)]);
  }
  // Fewer rows than ranks: the order repeats from its start as often as needed.
  const std::vector<Rows> repeated{{0}, {1}, {0}, {1}};
  for (std::int64_t r = 0; r < 4; ++r)
    CHECK(distributed_sampler_indices(2, 4, r, 0, 0, false, false) == repeated[static_cast<std::size_t>(r)]);
  CHECK(distributed_sampler_indices(2, 4, 3, 0, 0, false, true).empty());
  CHECK(distributed_sampler_indices(0, 2, 1, 0, 0, true, false).empty());
}

TEST_CASE("lab_order: distributed_sampler_indices ranks partition the padded order", "[data][lab_order]") {
  for (const std::int64_t n : {1, 5, 7, 10, 101}) {
    for (std::int64_t w = 1; w <= 4; ++w) {
      for (const bool drop : {false, true}) {
        const std::int64_t total = drop ? n / w * w : (n + w - 1) / w * w;
        const Rows order = torch_randperm(n, 42 + 2);
        Rows seen(static_cast<std::size_t>(total), -1);
        for (std::int64_t r = 0; r < w; ++r) {
          const Rows mine = distributed_sampler_indices(n, w, r, 42, 2, true, drop);
          REQUIRE(static_cast<std::int64_t>(mine.size()) == total / w);
          for (std::size_t k = 0; k < mine.size(); ++k) seen[static_cast<std::size_t>(r) + k * w] = mine[k];
        }
        for (std::int64_t p = 0; p < total; ++p) CHECK(seen[static_cast<std::size_t>(p)] == order[p % n]);
      }
    }
  }
}

TEST_CASE("lab_order: distributed_sampler_indices refuses bad ranks, sizes and seeds", "[data][lab_order]") {
  CHECK_THROWS_WITH(distributed_sampler_indices(-1, 2, 0, 0, 0, true, false), Catch::Contains("n=-1"));
  CHECK_THROWS_WITH(distributed_sampler_indices(10, 0, 0, 0, 0, true, false), Catch::Contains("world_size=0"));
  CHECK_THROWS_WITH(distributed_sampler_indices(10, 2, 2, 0, 0, true, false), Catch::Contains("rank=2"));
  CHECK_THROWS_WITH(distributed_sampler_indices(10, 2, -1, 0, 0, true, false), Catch::Contains("rank=-1"));
  CHECK_THROWS_WITH(distributed_sampler_indices(10, 2, 0, 0, -1, true, false), Catch::Contains("epoch=-1"));
  CHECK_THROWS_WITH(distributed_sampler_indices(10, 2, 0, kMaxSeed, 1, true, false), Catch::Contains("2^64-1"));
  CHECK(distributed_sampler_indices(10, 2, 0, kMaxSeed, 0, true, false).size() == 5);
  CHECK(distributed_sampler_indices(10, 2, 0, kMaxSeed, 1, false, false).size() == 5);  // no generator, no seed
}

TEST_CASE("lab_order: every order refuses a negative row count", "[data][lab_order]") {
  CHECK_THROWS_WITH(numpy_permutation(0, -1), Catch::Contains("n=-1 rows is negative"));
  CHECK_THROWS_AS(torch_randperm(-5, 0), ConfigError);
}
