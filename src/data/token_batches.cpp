// implements: TokenBatches (data/token_batches.hpp).
#include "tessera/data/token_batches.hpp"

#include <ATen/ATen.h>

#include <filesystem>
#include <span>
#include <system_error>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::data {
namespace {

TokenSource open_tokens(const RunConfig& cfg, std::int64_t vocab_size) {
  if (cfg.data.empty()) {
    const std::int64_t rows = cfg.num_train_samples > 0 ? cfg.num_train_samples : 512;
    return TokenSource::synthetic(static_cast<std::size_t>(rows * cfg.seq_len + 1), static_cast<std::uint32_t>(vocab_size),
                                  static_cast<std::uint64_t>(cfg.seed));
  }
  std::error_code ec;
  if (std::filesystem::is_directory(cfg.data, ec))
    throw ConfigError("data=" + cfg.data + ": a directory, but this model family reads a token file (nanoGPT uint16 "
                      "or llm.c .bin); directories of images are the image models' data");
  TokenSource tokens = TokenSource::open(cfg.data);
  if (tokens.max_token() >= vocab_size)
    throw ConfigError("data=" + cfg.data + ": holds token id " + std::to_string(tokens.max_token()) +
                      " but the model's vocab_size is " + std::to_string(vocab_size) +
                      "; tokenize with the model's own tokenizer");
  return tokens;
}

}  // namespace

TokenBatches::TokenBatches(const RunConfig& cfg, models::TokenSpec spec, std::int64_t world_size)
    : batch_size_(cfg.batch_size),
      seq_len_(cfg.seq_len),
      tokens_(std::make_unique<TokenSource>(open_tokens(cfg, spec.vocab_size))),
      order_(std::make_unique<BatchOrder>(*tokens_, BatchShape{world_size, cfg.batch_size, cfg.seq_len, cfg.accumulate_grad_batches},
                                          cfg.num_train_samples, cfg.limit_train_batches)),
      total_steps_(order_->total_steps(cfg.max_epochs, cfg.max_steps)),
      tokens_per_step_(world_size * cfg.batch_size * cfg.seq_len * cfg.accumulate_grad_batches) {}

models::TokenBatch TokenBatches::batch(std::int64_t step, std::int64_t micro, std::int64_t rank, c10::Device device) const {
  const auto options = at::TensorOptions().dtype(at::kLong);
  at::Tensor inputs = at::empty({batch_size_, seq_len_}, options);
  at::Tensor targets = at::empty({batch_size_, seq_len_}, options);
  const auto n = static_cast<std::size_t>(inputs.numel());
  order_->fill(step, micro, rank, std::span<std::int64_t>(inputs.data_ptr<std::int64_t>(), n),
               std::span<std::int64_t>(targets.data_ptr<std::int64_t>(), n));
  return {inputs.to(device), targets.to(device)};
}

}  // namespace tessera::data
