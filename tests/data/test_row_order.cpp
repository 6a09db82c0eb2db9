// tests: tessera::data::RowOrder, the row order of image (and caption, pair) data: W ranks of B rows read what one
// rank of W*B rows reads, a partial last batch is dropped, wrap-around, accumulation, limits and error messages;
// data_order=dataloader follows the labs' DataLoader / DistributedSampler epoch by epoch.
#include <catch2/catch.hpp>

#include <set>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/data/lab_order.hpp"
#include "tessera/data/row_order.hpp"

using tessera::ConfigError;
using tessera::data::BatchShape;
using tessera::data::RowOrder;

namespace {

// The rows micro-step (step, micro) reads over the whole job, rank by rank.
std::vector<std::int64_t> global_rows(const RowOrder& o, std::int64_t w, std::int64_t b, std::int64_t step,
                                      std::int64_t micro) {
  std::vector<std::int64_t> out;
  for (std::int64_t r = 0; r < w; ++r)
    for (std::int64_t i = 0; i < b; ++i) out.push_back(o.row(step, micro, r, i));
  return out;
}

}  // namespace

TEST_CASE("RowOrder: W ranks of B rows read what one rank of W*B rows reads", "[data][row_order]") {
  const RowOrder one(103, BatchShape{1, 8, 2, 2}, -1, 1.0, "rows");
  const RowOrder four(103, BatchShape{4, 2, 2, 2}, -1, 1.0, "rows");
  CHECK(one.steps_per_epoch() == 6);  // floor(103 / 8) = 12 micro-batches, 2 per step; 7 rows dropped
  CHECK(four.steps_per_epoch() == 6);
  CHECK(one.rows_per_epoch() == 96);
  for (std::int64_t s = 0; s < 14; ++s)
    for (std::int64_t m = 0; m < 2; ++m) CHECK(global_rows(four, 4, 2, s, m) == global_rows(one, 1, 8, s, m));
  // Step 0 reads rows 0..15 in file order; step 6 starts the second epoch with row 0 again.
  CHECK(global_rows(one, 1, 8, 0, 1) == std::vector<std::int64_t>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(global_rows(one, 1, 8, 6, 0) == global_rows(one, 1, 8, 0, 0));
  std::set<std::int64_t> epoch;
  for (std::int64_t s = 0; s < 6; ++s)
    for (std::int64_t m = 0; m < 2; ++m)
      for (std::int64_t r : global_rows(one, 1, 8, s, m)) epoch.insert(r);
  CHECK(epoch.size() == 96);
  CHECK(*epoch.rbegin() == 95);
}

TEST_CASE("RowOrder: num_train_samples, limit_train_batches and total steps", "[data][row_order]") {
  CHECK(RowOrder(100, BatchShape{1, 4, 2, 1}, 40, 1.0, "rows").steps_per_epoch() == 10);
  CHECK(RowOrder(100, BatchShape{1, 4, 2, 1}, -1, 0.25, "rows").steps_per_epoch() == 6);  // floor(25 * 0.25)
  CHECK(RowOrder(100, BatchShape{1, 4, 2, 1}, -1, 0.001, "rows").steps_per_epoch() == 1);  // never below one
  const RowOrder o(100, BatchShape{2, 5, 2, 1}, -1, 1.0, "rows");
  CHECK(o.total_steps(3, -1) == 30);
  CHECK(o.total_steps(3, 7) == 7);
}

TEST_CASE("RowOrder: too little data is refused with the numbers and the fix", "[data][row_order]") {
  CHECK_THROWS_WITH(RowOrder(6, BatchShape{4, 2, 2, 1}, -1, 1.0, "labels.jsonl in d (6 images)"),
                    Catch::Contains("labels.jsonl in d (6 images) has 6 rows but one micro-step needs "
                                    "world_size*batch_size = 4*2 = 8"));
  CHECK_THROWS_WITH(RowOrder(100, BatchShape{1, 8, 2, 1}, 4, 1.0, "rows"), Catch::Contains("num_train_samples=4 keeps 4"));
  CHECK_THROWS_WITH(RowOrder(16, BatchShape{1, 8, 2, 3}, -1, 1.0, "rows"),
                    Catch::Contains("accumulate_grad_batches=3 is larger than the 2 micro-batches"));
  CHECK_THROWS_AS(RowOrder(16, BatchShape{1, 8, 2, 1}, -1, 0.0, "rows"), ConfigError);
  const RowOrder o(16, BatchShape{2, 4, 2, 1}, -1, 1.0, "rows");
  CHECK_THROWS_AS(o.row(0, 0, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(o.row(0, 1, 0, 0), std::invalid_argument);
}

TEST_CASE("RowOrder: data_order=dataloader reads each epoch as the seeded DataLoader or DistributedSampler does",
          "[data][row_order]") {
  using tessera::DataOrder;
  // One rank: 10 usable rows of 23 (num_train_samples), batches of 3, 3 per epoch (the partial fourth dropped).
  const RowOrder one(23, BatchShape{1, 3, 2, 1}, 10, 1.0, "rows", DataOrder::dataloader, 7);
  CHECK(one.steps_per_epoch() == 3);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto want = tessera::data::dataloader_epoch_order(10, 7, epoch, 3, false);
    for (std::int64_t s = 0; s < 3; ++s)
      for (std::int64_t i = 0; i < 3; ++i) CHECK(one.row(epoch * 3 + s, 0, 0, i) == want[s * 3 + i]);
  }
  // Later epochs, then epoch 0 again once it has left the cache: the DataLoader's generator restarts.
  for (std::int64_t epoch = 3; epoch < 7; ++epoch) (void)one.row(epoch * 3, 0, 0, 0);
  const auto first = tessera::data::dataloader_epoch_order(10, 7, 0, 3, false);
  for (std::int64_t i = 0; i < 3; ++i) CHECK(one.row(0, 0, 0, i) == first[i]);
  CHECK(one.row(6 * 3, 0, 0, 1) == tessera::data::dataloader_epoch_order(10, 7, 6, 3, false)[1]);
  // Another seed, another order; the fixed order is the rows in turn.
  const RowOrder other(23, BatchShape{1, 3, 2, 1}, 10, 1.0, "rows", DataOrder::dataloader, 8);
  bool differs = false;
  for (std::int64_t i = 0; i < 3; ++i) differs = differs || other.row(0, 0, 0, i) != one.row(0, 0, 0, i);
  CHECK(differs);
  // Three ranks of 2 rows over 10 rows: each rank's ceil(10 / 3) = 4 indices, 2 batches an epoch, accumulation 2.
  const RowOrder three(10, BatchShape{3, 2, 2, 2}, -1, 1.0, "rows", DataOrder::dataloader, 5);
  CHECK(three.steps_per_epoch() == 1);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch)
    for (std::int64_t rank = 0; rank < 3; ++rank) {
      const auto want = tessera::data::distributed_sampler_indices(10, 3, rank, 5, epoch, true, false);
      for (std::int64_t m = 0; m < 2; ++m)
        for (std::int64_t i = 0; i < 2; ++i) CHECK(three.row(epoch, m, rank, i) == want[m * 2 + i]);
    }
}
