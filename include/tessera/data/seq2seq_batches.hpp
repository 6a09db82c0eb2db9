#pragma once
// defines: tessera::data::Seq2SeqBatches, the data of the encoder-decoder language models (families whose Batch is
// models::Seq2SeqBatch, T5's), read in RowOrder's rank-independent row order:
//   data=DIR with DIR/pairs.jsonl   one {"input_ids": [...], "labels": [...]} per line (token ids of the model's own
//   (or data=DIR/pairs.jsonl)       tokenizer; labels may hold -100, ignored by the loss); blank lines skipped
//   no data=                        a deterministic synthetic copy task: num_train_samples rows (512 when -1) of
//                                   seq_len input ids uniform in [2, vocab_size) (0 is T5's pad, 1 its eos), whose
//                                   labels are their first max(1, seq_len / 2), so that the loss can fall (through
//                                   cross-attention)
// Every row is checked (ids in the vocabulary, no longer than seq_len) before training starts; a bad one is a
// ConfigError naming the file, the line and what is wrong. A batch is padded to its own longest input and label row.
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/data/row_order.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera::data {

class Seq2SeqBatches {
 public:
  Seq2SeqBatches(const RunConfig& cfg, models::Seq2SeqSpec spec, std::int64_t world_size);

  // Rank `rank`'s B rows of micro-step `micro` of step `step`, all int64 on `device`: inputs (B, S) padded with the
  // model's pad_token_id, attention_mask (B, S) 1 for a token and 0 for padding, labels (B, L) padded with -100;
  // S and L are the longest input and label row among these B rows.
  models::Seq2SeqBatch batch(std::int64_t step, std::int64_t micro, std::int64_t rank, c10::Device device) const;

  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t steps_per_epoch() const { return order_->steps_per_epoch(); }
  // The mean number of non-pad encoder and decoder tokens one optimizer step trains on: W * B * A * (mean input
  // length + mean label length), the means over the rows an epoch reads, rounded to the nearest integer, at least 1.
  std::int64_t tokens_per_step() const { return tokens_per_step_; }
  std::string_view description() const { return description_; }
  std::int64_t size() const { return static_cast<std::int64_t>(inputs_.size()); }
  const models::Seq2SeqSpec& spec() const { return spec_; }
  // One row, unpadded: its input ids and its labels (which may hold -100).
  const std::vector<std::int64_t>& input_ids(std::int64_t row) const { return inputs_[static_cast<std::size_t>(row)]; }
  const std::vector<std::int64_t>& labels(std::int64_t row) const { return labels_[static_cast<std::size_t>(row)]; }

 private:
  models::Seq2SeqSpec spec_;
  std::int64_t batch_size_;
  std::vector<std::vector<std::int64_t>> inputs_, labels_;
  std::string description_;
  std::unique_ptr<RowOrder> order_;
  std::int64_t total_steps_, tokens_per_step_;
};

}  // namespace tessera::data
