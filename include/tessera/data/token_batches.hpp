#pragma once
// defines: tessera::data::TokenBatches, the data of the causal language models (families whose Batch is
// models::TokenBatch): data= token file or the synthetic stream, read in BatchOrder's rank-independent row order.
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "tessera/config/run_config.hpp"
#include "tessera/data/batch_order.hpp"
#include "tessera/data/token_source.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera::data {

class TokenBatches {
 public:
  // data= file, or the synthetic stream (num_train_samples rows, 512 when -1, of seq_len tokens, plus one).
  // Refuses a token id >= vocab_size (ConfigError naming the file, the id and the vocab size), and what
  // BatchOrder refuses (too few tokens for one step, ...).
  TokenBatches(const RunConfig& cfg, models::TokenSpec spec, std::int64_t world_size);

  // Rank `rank`'s rows of micro-step `micro` of step `step`: (B, T) int64 inputs and targets on `device`.
  models::TokenBatch batch(std::int64_t step, std::int64_t micro, std::int64_t rank, c10::Device device) const;

  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t steps_per_epoch() const { return order_->steps_per_epoch(); }
  // Tokens (of every rank and micro-step) one optimizer step trains on: W * B * T * A.
  std::int64_t tokens_per_step() const { return tokens_per_step_; }
  std::string_view description() const { return tokens_->description(); }
  const TokenSource& tokens() const { return *tokens_; }

 private:
  std::int64_t batch_size_, seq_len_;
  std::unique_ptr<TokenSource> tokens_;  // BatchOrder points at it: it must not move
  std::unique_ptr<BatchOrder> order_;
  std::int64_t total_steps_, tokens_per_step_;
};

}  // namespace tessera::data
