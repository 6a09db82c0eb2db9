// implements: tessera::data::BatchOrder (epoch length, chunk positions, rank rows).
#include "tessera/data/batch_order.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::data {
namespace {

void require_positive(const char* key, std::int64_t v) {
  if (v < 1) throw ConfigError(std::string(key) + " is " + std::to_string(v) + "; it must be >= 1");
}

}  // namespace

BatchOrder::BatchOrder(const TokenSource& tokens, BatchShape shape, std::int64_t num_train_samples,
                       double limit_train_batches)
    : tokens_(&tokens), shape_(shape) {
  require_positive("world_size", shape.world_size);
  require_positive("batch_size", shape.batch_size);
  require_positive("seq_len", shape.seq_len);
  require_positive("accumulate_grad_batches", shape.accumulate);
  if (num_train_samples != -1 && num_train_samples < 1) {
    throw ConfigError("num_train_samples is " + std::to_string(num_train_samples) +
                      "; use -1 (the whole file) or a count >= 1 of seq_len-token samples");
  }
  if (!(limit_train_batches > 0.0 && limit_train_batches <= 1.0)) {  // also refuses NaN
    throw ConfigError("limit_train_batches is " + std::to_string(limit_train_batches) +
                      "; it must be a fraction of the epoch in (0, 1]");
  }

  const std::int64_t T = shape.seq_len;
  std::int64_t rows = 0;  // G
  std::int64_t step_tokens = 0;  // tokens per optimizer step, which the trainer reports
  if (__builtin_mul_overflow(shape.world_size, shape.batch_size, &rows) ||
      __builtin_mul_overflow(rows, T, &chunk_tokens_) || chunk_tokens_ == INT64_MAX ||
      __builtin_mul_overflow(chunk_tokens_, shape.accumulate, &step_tokens)) {
    throw ConfigError("world_size*batch_size*seq_len*accumulate_grad_batches = " + std::to_string(shape.world_size) + "*" +
                      std::to_string(shape.batch_size) + "*" + std::to_string(T) + "*" + std::to_string(shape.accumulate) +
                      " tokens per step overflows 64 bits; use realistic sizes");
  }

  const auto n = static_cast<std::int64_t>(tokens.size());
  std::int64_t usable = n;
  std::int64_t sample_tokens = 0;
  if (num_train_samples != -1 && !__builtin_mul_overflow(num_train_samples, T, &sample_tokens) && sample_tokens < n) {
    usable = sample_tokens + 1;  // the last sample's final target
  }
  chunks_per_epoch_ = usable >= 1 ? (usable - 1) / chunk_tokens_ : 0;
  if (chunks_per_epoch_ == 0) {
    std::string msg = std::string(tokens.description()) + " has " + std::to_string(n) + " tokens";
    if (usable < n) {
      msg += " (num_train_samples=" + std::to_string(num_train_samples) + " keeps " + std::to_string(usable) + ")";
    }
    msg += " but one micro-step needs G*T+1 = " + std::to_string(chunk_tokens_ + 1) +
           " tokens (world_size*batch_size*seq_len+1 = " + std::to_string(shape.world_size) + "*" +
           std::to_string(shape.batch_size) + "*" + std::to_string(T) + "+1); use a smaller batch_size or seq_len" +
           (usable < n ? ", a larger num_train_samples," : "") + " or a longer token file";
    throw ConfigError(msg);
  }
  if (limit_train_batches < 1.0) {
    // floor, as Lightning does, but never below one micro-batch.
    const auto limited = static_cast<std::int64_t>(std::floor(static_cast<double>(chunks_per_epoch_) * limit_train_batches));
    chunks_per_epoch_ = std::max<std::int64_t>(1, limited);
  }
  if (steps_per_epoch() == 0) {
    throw ConfigError("accumulate_grad_batches=" + std::to_string(shape.accumulate) + " is larger than the " +
                      std::to_string(chunks_per_epoch_) + " micro-batches in one epoch of " +
                      std::string(tokens.description()) +
                      " (after num_train_samples/limit_train_batches), so no optimizer step fits; lower "
                      "accumulate_grad_batches, batch_size or seq_len, or use more data");
  }
}

std::int64_t BatchOrder::total_steps(std::int64_t max_epochs, std::int64_t max_steps) const {
  if (max_steps > 0) return max_steps;
  if (max_epochs < 1) {
    throw ConfigError("max_epochs is " + std::to_string(max_epochs) + " and max_steps is " + std::to_string(max_steps) +
                      "; set max_steps > 0 or max_epochs >= 1");
  }
  std::int64_t steps = 0;
  if (__builtin_mul_overflow(max_epochs, steps_per_epoch(), &steps)) {
    throw ConfigError("max_epochs=" + std::to_string(max_epochs) + ": times the " + std::to_string(steps_per_epoch()) +
                      " steps of an epoch overflows 64 bits; use fewer epochs, or max_steps");
  }
  return steps;
}

std::int64_t BatchOrder::chunk_start_token(std::int64_t step, std::int64_t micro) const {
  if (step < 0 || micro < 0 || micro >= shape_.accumulate) {
    throw std::invalid_argument("BatchOrder: step " + std::to_string(step) + " / micro " + std::to_string(micro) +
                                " out of range (step >= 0, micro in [0, " + std::to_string(shape_.accumulate) + "))");
  }
  // c = s*A + m can exceed int64 only after ~2^63 micro-steps; reduce s first to stay exact.
  const std::int64_t s = step % chunks_per_epoch_;
  const std::int64_t c = (s * shape_.accumulate + micro) % chunks_per_epoch_;
  return c * chunk_tokens_;
}

void BatchOrder::fill(std::int64_t step, std::int64_t micro, std::int64_t rank, std::span<std::int64_t> inputs,
                      std::span<std::int64_t> targets) const {
  const std::int64_t B = shape_.batch_size, T = shape_.seq_len;
  const auto want = static_cast<std::size_t>(B * T);
  if (rank < 0 || rank >= shape_.world_size || inputs.size() != want || targets.size() != want) {
    throw std::invalid_argument("BatchOrder::fill: rank " + std::to_string(rank) + " (world_size " +
                                std::to_string(shape_.world_size) + "), inputs " + std::to_string(inputs.size()) +
                                " and targets " + std::to_string(targets.size()) + " ids; need B*T = " +
                                std::to_string(want) + " each");
  }
  // Rank k's rows are contiguous in the chunk: B*T tokens starting at chunk start + k*B*T,
  // plus one more for the last target.
  tokens_->ensure_unchanged();  // a token file cut short under us would end the process with SIGBUS
  const std::uint16_t* src = tokens_->tokens().data() + chunk_start_token(step, micro) + rank * B * T;
  for (std::size_t i = 0; i < want; ++i) {
    inputs[i] = src[i];
    targets[i] = src[i + 1];
  }
}

}  // namespace tessera::data
