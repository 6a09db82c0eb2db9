#pragma once
// defines: tessera::data::RowOrder, the order in which every rank reads the rows of a dataset of whole rows
// (images, captions, pairs), the row form of BatchOrder's rule for tokens; the global order does not depend on
// world_size.
//
// R rows (num_train_samples of them when set and smaller), B = batch_size, W = world_size, G = W*B rows per
// micro-step, A = accumulate. Micro-batch c = s*A + m of optimizer step s is rows [p*G, (p+1)*G) with
// p = c mod chunks_per_epoch, chunks_per_epoch = floor(R / G) (a last partial batch is dropped, as a DataLoader
// with drop_last), scaled by limit_train_batches and floored, at least 1. Rank k takes rows k*B .. k*B+B-1 of it.
//
// data_order=dataloader instead orders each epoch as the labs' loaders do (data/lab_order.hpp), over the N usable
// rows: micro-batch c is epoch e = c / chunks_per_epoch, position p = c mod chunks_per_epoch; on one rank its rows
// are DataLoader(shuffle=True, generator seeded `seed`)'s epoch-e order [p*B, (p+1)*B), chunks_per_epoch =
// floor(N / B); on W > 1 ranks rank k's are DistributedSampler(num_replicas=W, rank=k, shuffle=True, seed=seed)
// after set_epoch(e), [p*B, (p+1)*B) of its ceil(N / W) indices, chunks_per_epoch = floor(ceil(N / W) / B). This
// order depends on the world size, as the labs' does.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/data/lab_order.hpp"

#include "tessera/data/batch_order.hpp"

namespace tessera::data {

class RowOrder {
 public:
  // ConfigError, naming `what` (e.g. "labels.jsonl in data/ (120 images)"), when one micro-step needs more rows than
  // there are, when no optimizer step fits an epoch, or for a bad num_train_samples / limit_train_batches.
  RowOrder(std::int64_t rows, BatchShape shape, std::int64_t num_train_samples, double limit_train_batches,
           const std::string& what, DataOrder order = DataOrder::fixed, std::uint64_t seed = 0);

  std::int64_t rows_per_epoch() const { return chunks_per_epoch_ * shape_.world_size * shape_.batch_size; }
  std::int64_t steps_per_epoch() const { return chunks_per_epoch_ / shape_.accumulate; }
  // max_steps if max_steps > 0, else max_epochs * steps_per_epoch().
  std::int64_t total_steps(std::int64_t max_epochs, std::int64_t max_steps) const;
  // The dataset row of rank `rank`'s i-th row of micro-step `micro` of step `step`.
  std::int64_t row(std::int64_t step, std::int64_t micro, std::int64_t rank, std::int64_t i) const;

 private:
  BatchShape shape_;
  std::int64_t chunks_per_epoch_ = 0;
  DataOrder order_ = DataOrder::fixed;
  std::uint64_t seed_ = 0;
  std::int64_t usable_ = 0;
  // dataloader order: (epoch, rank) -> that epoch's indices for that rank, the last few computed; on one rank the
  // DataLoader's generator, advanced epoch by epoch (restarted only when an earlier epoch is asked for).
  mutable std::mutex mutex_;
  mutable std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int64_t>> epochs_;
  mutable std::optional<TorchShuffledEpochs> loader_;
};

}  // namespace tessera::data
