#pragma once
// defines: tessera::data::BatchShape and BatchOrder, the order in which every rank reads
// token rows; the global row order does not depend on world_size.
//
// T = seq_len, B = batch_size (rows per rank per micro-step), W = world_size,
// G = W*B rows per micro-step, A = accumulate (accumulate_grad_batches).
// Optimizer step s, micro-step m reads chunk c = s*A + m: G*T+1 tokens starting at token
// p(c)*G*T with p(c) = c mod chunks_per_epoch. Row r of a chunk is inputs [start + r*T, +T)
// and targets shifted by one token; rank k takes rows k*B .. k*B+B-1. So W=2, B=4 reads the
// same rows per micro-step as W=1, B=8, split between the ranks.
#include <cstdint>
#include <span>

#include "tessera/data/token_source.hpp"

namespace tessera::data {

struct BatchShape {
  std::int64_t world_size = 1, batch_size = 1, seq_len = 2, accumulate = 1;
};

class BatchOrder {
 public:
  // Usable tokens U = size() if num_train_samples == -1, else min(size(), num_train_samples*T + 1);
  // chunks_per_epoch = floor((U-1) / (G*T)), then scaled by limit_train_batches (in (0, 1]) and
  // floored, keeping at least 1. Throws ConfigError for a non-positive shape field, a bad
  // num_train_samples / limit_train_batches, too few tokens for one micro-step, or fewer
  // micro-steps per epoch than A. Keeps a pointer to `tokens`, which must outlive this object
  // and must not be moved from.
  BatchOrder(const TokenSource& tokens, BatchShape shape, std::int64_t num_train_samples = -1,
             double limit_train_batches = 1.0);

  std::int64_t chunks_per_epoch() const { return chunks_per_epoch_; }
  std::int64_t steps_per_epoch() const { return chunks_per_epoch_ / shape_.accumulate; }
  // max_steps if max_steps > 0, else max_epochs * steps_per_epoch(); ConfigError if both are <= 0.
  std::int64_t total_steps(std::int64_t max_epochs, std::int64_t max_steps) const;
  // First token of chunk step*A + micro: p(c)*G*T. step >= 0, micro in [0, A), else std::invalid_argument.
  std::int64_t chunk_start_token(std::int64_t step, std::int64_t micro) const;
  // Writes rank `rank`'s B rows as row-major [B, T] int64 token ids; inputs and targets must
  // each be exactly B*T long and rank in [0, W), else std::invalid_argument.
  void fill(std::int64_t step, std::int64_t micro, std::int64_t rank, std::span<std::int64_t> inputs,
            std::span<std::int64_t> targets) const;

 private:
  const TokenSource* tokens_;
  BatchShape shape_;
  std::int64_t chunk_tokens_ = 0;  // G*T: the stride between chunk starts
  std::int64_t chunks_per_epoch_ = 0;
};

}  // namespace tessera::data
