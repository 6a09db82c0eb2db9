#pragma once
// defines: tessera::data::TokenBatches, the data of the causal language models (families whose Batch is
// models::TokenBatch): data= token file, text (data/text_data.hpp), a table's text or Alpaca columns
// (data/table_source.hpp, read_table_text_rows: a datasets directory, load_dataset's cache of Alpaca2k, Parquet) or
// the synthetic stream. A token stream (a token
// file, packed documents, synthetic) is read in BatchOrder's rank-independent row order; instruction records are
// one row each, in RowOrder's, cut or padded to seq_len as litgpt's SFT data: inputs padded with 0, targets -100
// (ignored by the loss) on padding and, with mask_prompt, on the prompt.
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "tessera/config/run_config.hpp"
#include "tessera/data/batch_order.hpp"
#include "tessera/data/row_order.hpp"
#include "tessera/data/text_data.hpp"
#include "tessera/data/token_source.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera::data {

class TokenBatches {
 public:
  // data= file, or the synthetic stream (num_train_samples rows, 512 when -1, of seq_len tokens, plus one).
  // Text data is tokenized with tokenizer= (else model_dir's tokenizer) through its token cache. Refuses a token id
  // >= vocab_size (ConfigError naming the file, the id and the vocab size), text without a tokenizer, and what
  // BatchOrder / RowOrder refuse (too little data for one step, ...).
  TokenBatches(const RunConfig& cfg, models::TokenSpec spec, std::int64_t world_size);

  // Rank `rank`'s rows of micro-step `micro` of step `step`: (B, T) int64 inputs and targets on `device`.
  models::TokenBatch batch(std::int64_t step, std::int64_t micro, std::int64_t rank, c10::Device device) const;

  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t steps_per_epoch() const;
  // Tokens (of every rank and micro-step) one optimizer step trains on: W * B * T * A.
  std::int64_t tokens_per_step() const { return tokens_per_step_; }
  std::string_view description() const { return tokens_->description(); }
  const TokenSource& tokens() const { return *tokens_; }

 private:
  std::int64_t batch_size_, seq_len_;
  bool mask_prompt_;
  std::unique_ptr<TokenSource> tokens_;  // BatchOrder points at it: it must not move
  std::unique_ptr<BatchOrder> order_;     // a token stream, else null
  std::unique_ptr<TextRows> rows_;        // instruction records, else null
  std::unique_ptr<RowOrder> row_order_;   // with rows_
  std::int64_t total_steps_ = 0, tokens_per_step_ = 0;
};

}  // namespace tessera::data
