// implements: TokenBatches (data/token_batches.hpp).
#include "tessera/data/token_batches.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/data/table_rows.hpp"
#include "tessera/models/family_parts.hpp"
#include "tessera/text/tokenizer.hpp"

namespace tessera::data {
namespace {

void check_vocab(const TokenSource& tokens, const std::string& what, std::int64_t vocab_size, const std::string& fix) {
  if (tokens.max_token() >= vocab_size)
    throw ConfigError(what + ": holds token id " + std::to_string(tokens.max_token()) +
                      " but the model's vocab_size is " + std::to_string(vocab_size) + "; " + fix);
}

TokenSource open_tokens(const RunConfig& cfg, std::int64_t vocab_size) {
  if (cfg.data.empty()) {
    const std::int64_t rows = cfg.num_train_samples > 0 ? cfg.num_train_samples : 512;
    return TokenSource::synthetic(static_cast<std::size_t>(rows * cfg.seq_len + 1), static_cast<std::uint32_t>(vocab_size),
                                  static_cast<std::uint64_t>(cfg.seed));
  }
  std::error_code ec;
  if (std::filesystem::is_directory(cfg.data, ec))
    throw ConfigError("data=" + cfg.data + ": a directory, but this model family reads a token file (nanoGPT uint16 "
                      "or llm.c .bin) or text (.txt, .jsonl, .json); directories of images are the image models' data");
  TokenSource tokens = TokenSource::open(cfg.data);
  check_vocab(tokens, "data=" + cfg.data, vocab_size, "tokenize with the model's own tokenizer");
  return tokens;
}

// Text data= through its token cache, with tokenizer= or model_dir's tokenizer.
TextRows open_text(const RunConfig& cfg, std::string& description) {
  const std::string source = cfg.tokenizer.empty() ? cfg.model_dir : cfg.tokenizer;
  if (source.empty())
    throw ConfigError("data=" + cfg.data + ": text, which needs a tokenizer; give tokenizer=DIR (a model dir with "
                      "tokenizer.model or tokenizer.json, or the file itself) or model_dir=DIR, or give a token file");
  const text::Tokenizer tokenizer = text::Tokenizer::load(source);
  if (TableSource::recognizes(cfg.data)) {
    const TableRows table = TableRows::open(cfg);
    TextRows rows = read_table_text_rows(table, cfg.text_column, tokenizer);
    description = std::string(rows.kind == TextKind::instructions ? "instructions from " : "documents from ") +
                  table.description() + " (" + std::to_string(rows.tokens.size()) + " tokens; tokenizer " +
                  tokenizer.source().string() + ")";
    return rows;
  }
  TextRows rows = load_text_rows(cfg.data, tokenizer);
  description = std::string(rows.kind == TextKind::instructions ? "instructions " : "documents ") + cfg.data + " (" +
                std::to_string(rows.rows()) + " records, " +
                std::to_string(rows.tokens.size()) + " tokens; tokenizer " + tokenizer.source().string() + ", cache " +
                token_cache_path(cfg.data, tokenizer).filename().string() + ")";
  return rows;
}

}  // namespace

TokenBatches::TokenBatches(const RunConfig& cfg, models::TokenSpec spec, std::int64_t world_size)
    : batch_size_(cfg.batch_size), seq_len_(cfg.seq_len), mask_prompt_(cfg.mask_prompt) {
  const BatchShape shape{world_size, cfg.batch_size, cfg.seq_len, cfg.accumulate_grad_batches};
  if (!cfg.data.empty() && (is_text_data(cfg.data) || TableSource::recognizes(cfg.data))) {
    std::string description;
    TextRows rows = open_text(cfg, description);
    const bool instructions = rows.kind == TextKind::instructions;
    tokens_ = std::make_unique<TokenSource>(TokenSource::from_tokens(std::move(rows.tokens), description));
    check_vocab(*tokens_, "data=" + cfg.data, spec.vocab_size,
                "the tokenizer is not the model's: give the model's own with tokenizer= or model_dir=");
    if (instructions) {
      rows_ = std::make_unique<TextRows>(std::move(rows));
      row_order_ = std::make_unique<RowOrder>(rows_->rows(), shape, cfg.num_train_samples, cfg.limit_train_batches,
                                              "data=" + cfg.data + " (" + std::to_string(rows_->rows()) + " records)",
                                              cfg.data_order, static_cast<std::uint64_t>(cfg.seed));
      if (mask_prompt_) {
        std::int64_t untrained = 0;
        for (std::int64_t r = 0; r < rows_->rows(); ++r)
          if (static_cast<std::int64_t>(rows_->prompt_lengths[static_cast<std::size_t>(r)]) >= seq_len_) ++untrained;
        if (untrained == rows_->rows())
          throw ConfigError("data=" + cfg.data + ": with mask_prompt=true and seq_len=" + std::to_string(seq_len_) +
                            " no record keeps a token of its response; raise seq_len or set mask_prompt=false");
        if (untrained > 0)
          std::cerr << "[data] " << untrained << " of " << rows_->rows() << " records of " << cfg.data
                    << " keep no response token within seq_len=" << seq_len_
                    << " under mask_prompt=true; they add nothing to the loss\n";
      }
      total_steps_ = row_order_->total_steps(cfg.max_epochs, cfg.max_steps);
    }
  } else {
    tokens_ = std::make_unique<TokenSource>(open_tokens(cfg, spec.vocab_size));
  }
  if (!row_order_) {
    order_ = std::make_unique<BatchOrder>(*tokens_, shape, cfg.num_train_samples, cfg.limit_train_batches);
    total_steps_ = order_->total_steps(cfg.max_epochs, cfg.max_steps);
  }
  tokens_per_step_ = world_size * cfg.batch_size * cfg.seq_len * cfg.accumulate_grad_batches;
}

std::int64_t TokenBatches::steps_per_epoch() const {
  return order_ ? order_->steps_per_epoch() : row_order_->steps_per_epoch();
}

models::TokenBatch TokenBatches::batch(std::int64_t step, std::int64_t micro, std::int64_t rank, c10::Device device) const {
  const auto options = at::TensorOptions().dtype(at::kLong);
  at::Tensor inputs = at::empty({batch_size_, seq_len_}, options);
  at::Tensor targets = at::empty({batch_size_, seq_len_}, options);
  const auto n = static_cast<std::size_t>(inputs.numel());
  const std::span<std::int64_t> in(inputs.data_ptr<std::int64_t>(), n), tg(targets.data_ptr<std::int64_t>(), n);
  if (order_) {
    order_->fill(step, micro, rank, in, tg);
  } else {
    // litgpt's SFT rows: the record's tokens cut to seq_len; the model sees ids[0, T) and learns ids[t + 1] at t.
    const auto tokens = tokens_->tokens();
    const auto T = static_cast<std::size_t>(seq_len_);
    for (std::int64_t i = 0; i < batch_size_; ++i) {
      const auto r = static_cast<std::size_t>(row_order_->row(step, micro, rank, i));
      const std::size_t begin = rows_->starts[r];
      const std::size_t len = std::min<std::size_t>(rows_->starts[r + 1] - begin, T);
      const std::size_t prompt = mask_prompt_ ? rows_->prompt_lengths[r] : 0;
      const auto row_in = in.subspan(static_cast<std::size_t>(i) * T, T);
      const auto row_tg = tg.subspan(static_cast<std::size_t>(i) * T, T);
      for (std::size_t t = 0; t < T; ++t) {
        row_in[t] = t < len ? tokens[begin + t] : 0;
        row_tg[t] = (t + 1 < len && t + 1 >= prompt) ? tokens[begin + t + 1] : models::kIgnoreIndex;
      }
    }
  }
  return {inputs.to(device), targets.to(device)};
}

}  // namespace tessera::data
