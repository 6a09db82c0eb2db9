#pragma once
// defines: tessera::data::RowOrder, the order in which every rank reads the rows of a dataset of whole rows
// (images, captions, pairs), the row form of BatchOrder's rule for tokens; the global order does not depend on
// world_size.
//
// R rows (num_train_samples of them when set and smaller), B = batch_size, W = world_size, G = W*B rows per
// micro-step, A = accumulate. Micro-batch c = s*A + m of optimizer step s is rows [p*G, (p+1)*G) with
// p = c mod chunks_per_epoch, chunks_per_epoch = floor(R / G) (a last partial batch is dropped, as a DataLoader
// with drop_last), scaled by limit_train_batches and floored, at least 1. Rank k takes rows k*B .. k*B+B-1 of it.
#include <cstdint>
#include <string>

#include "tessera/data/batch_order.hpp"

namespace tessera::data {

class RowOrder {
 public:
  // ConfigError, naming `what` (e.g. "labels.jsonl in data/ (120 images)"), when one micro-step needs more rows than
  // there are, when no optimizer step fits an epoch, or for a bad num_train_samples / limit_train_batches.
  RowOrder(std::int64_t rows, BatchShape shape, std::int64_t num_train_samples, double limit_train_batches,
           const std::string& what);

  std::int64_t rows_per_epoch() const { return chunks_per_epoch_ * shape_.world_size * shape_.batch_size; }
  std::int64_t steps_per_epoch() const { return chunks_per_epoch_ / shape_.accumulate; }
  // max_steps if max_steps > 0, else max_epochs * steps_per_epoch().
  std::int64_t total_steps(std::int64_t max_epochs, std::int64_t max_steps) const;
  // The dataset row of rank `rank`'s i-th row of micro-step `micro` of step `step`.
  std::int64_t row(std::int64_t step, std::int64_t micro, std::int64_t rank, std::int64_t i) const;

 private:
  BatchShape shape_;
  std::int64_t chunks_per_epoch_ = 0;
};

}  // namespace tessera::data
