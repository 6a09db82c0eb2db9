// implements: tessera::data::RowOrder (data/row_order.hpp).
#include "tessera/data/row_order.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tessera/core/error.hpp"
#include "tessera/data/lab_order.hpp"

namespace tessera::data {

RowOrder::RowOrder(std::int64_t rows, BatchShape shape, std::int64_t num_train_samples, double limit_train_batches,
                   const std::string& what, DataOrder order, std::uint64_t seed)
    : shape_(shape), order_(order), seed_(seed) {
  if (shape.world_size < 1 || shape.batch_size < 1 || shape.accumulate < 1)
    throw ConfigError("world_size, batch_size and accumulate_grad_batches must be >= 1");
  if (num_train_samples != -1 && num_train_samples < 1)
    throw ConfigError("num_train_samples is " + std::to_string(num_train_samples) +
                      "; use -1 (all of the data) or a count >= 1 of rows");
  if (!(limit_train_batches > 0.0 && limit_train_batches <= 1.0))
    throw ConfigError("limit_train_batches is " + std::to_string(limit_train_batches) +
                      "; it must be a fraction of the epoch in (0, 1]");
  std::int64_t g = 0, step_rows = 0;
  if (__builtin_mul_overflow(shape.world_size, shape.batch_size, &g) ||
      __builtin_mul_overflow(g, shape.accumulate, &step_rows))
    throw ConfigError("world_size*batch_size*accumulate_grad_batches overflows 64 bits; use realistic sizes");
  const std::int64_t usable = num_train_samples > 0 ? std::min(rows, num_train_samples) : rows;
  usable_ = usable;
  chunks_per_epoch_ = usable / g;
  if (order == DataOrder::dataloader && shape.world_size > 1) {
    // DistributedSampler pads each rank's share to ceil(N / W) indices.
    chunks_per_epoch_ = (usable + shape.world_size - 1) / shape.world_size / shape.batch_size;
  }
  if (chunks_per_epoch_ == 0)
    throw ConfigError(what + " has " + std::to_string(rows) + " rows" +
                      (usable < rows ? " (num_train_samples=" + std::to_string(num_train_samples) + " keeps " +
                                           std::to_string(usable) + ")"
                                     : std::string()) +
                      " but one micro-step needs world_size*batch_size = " + std::to_string(shape.world_size) + "*" +
                      std::to_string(shape.batch_size) + " = " + std::to_string(g) +
                      "; use a smaller batch_size, fewer ranks, or more data");
  if (limit_train_batches < 1.0) {  // floor, as Lightning does, but never below one micro-batch
    const auto limited = static_cast<std::int64_t>(std::floor(static_cast<double>(chunks_per_epoch_) * limit_train_batches));
    chunks_per_epoch_ = std::max<std::int64_t>(1, limited);
  }
  if (steps_per_epoch() == 0)
    throw ConfigError("accumulate_grad_batches=" + std::to_string(shape.accumulate) + " is larger than the " +
                      std::to_string(chunks_per_epoch_) + " micro-batches in one epoch of " + what +
                      " (after num_train_samples/limit_train_batches), so no optimizer step fits; lower "
                      "accumulate_grad_batches or batch_size, or use more data");
}

std::int64_t RowOrder::total_steps(std::int64_t max_epochs, std::int64_t max_steps) const {
  if (max_steps > 0) return max_steps;
  if (max_epochs < 1)
    throw ConfigError("max_epochs is " + std::to_string(max_epochs) + " and max_steps is " + std::to_string(max_steps) +
                      "; set max_steps > 0 or max_epochs >= 1");
  std::int64_t steps = 0;
  if (__builtin_mul_overflow(max_epochs, steps_per_epoch(), &steps))
    throw ConfigError("max_epochs=" + std::to_string(max_epochs) + ": times the " + std::to_string(steps_per_epoch()) +
                      " steps of an epoch overflows 64 bits; use fewer epochs, or max_steps");
  return steps;
}

std::int64_t RowOrder::row(std::int64_t step, std::int64_t micro, std::int64_t rank, std::int64_t i) const {
  if (step < 0 || micro < 0 || micro >= shape_.accumulate || rank < 0 || rank >= shape_.world_size || i < 0 ||
      i >= shape_.batch_size)
    throw std::invalid_argument("RowOrder::row: step " + std::to_string(step) + ", micro " + std::to_string(micro) +
                                ", rank " + std::to_string(rank) + ", row " + std::to_string(i) + " out of range");
  if (order_ == DataOrder::fixed) {
    const std::int64_t s = step % chunks_per_epoch_;  // reduced first: s*A + m stays exact
    const std::int64_t c = (s * shape_.accumulate + micro) % chunks_per_epoch_;
    return (c * shape_.world_size + rank) * shape_.batch_size + i;
  }
  const std::int64_t c = step * shape_.accumulate + micro;
  const std::int64_t epoch = c / chunks_per_epoch_, p = c % chunks_per_epoch_;
  std::lock_guard lock(mutex_);
  auto it = epochs_.find({epoch, rank});
  if (it == epochs_.end()) {
    if (epochs_.size() >= 4) epochs_.erase(epochs_.begin());  // the run moves forward: the oldest epoch goes
    std::vector<std::int64_t> rows;
    if (shape_.world_size == 1) {
      if (!loader_ || loader_->epochs_done() > epoch) loader_.emplace(usable_, seed_, shape_.batch_size, false);
      while (loader_->epochs_done() < epoch) loader_->next_epoch();
      rows = loader_->next_epoch();
    } else {
      rows = distributed_sampler_indices(usable_, shape_.world_size, rank, seed_, epoch, /*shuffle=*/true,
                                         /*drop_last=*/false);
    }
    it = epochs_.emplace(std::make_pair(epoch, rank), std::move(rows)).first;
  }
  return it->second[static_cast<std::size_t>(p * shape_.batch_size + i)];
}

}  // namespace tessera::data
