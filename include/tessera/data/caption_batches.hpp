#pragma once
// defines: tessera::data::CaptionBatches, the data of the image-to-text models (families whose Batch is
// models::CaptionBatch, BLIP-2's), read in RowOrder's rank-independent row order:
//   data=DIR with DIR/captions.jsonl   one {"image": "images/0001.png", "input_ids": [...]} per line, optionally with
//   (or data=DIR/captions.jsonl)       "labels": [...] (which may hold -100, ignored by the loss); the image's path
//                                      relative to the file's directory, the ids of the model's own tokenizer; blank
//                                      lines skipped
//   data=a table                       a datasets directory or Parquet (data/table_source.hpp): image_column= (an
//                                      Image feature: the file's bytes, decoded as Pillow does) and text_column= (the
//                                      caption as text, tokenized as below), its rows in TableRows' order
//                                      (shuffle_seed=); every image's header is checked before training starts
//   no data=                           a deterministic synthetic set: num_train_samples rows (512 when -1); row r has
//                                      class k = splitmix64(seed, r) % 16, its image is class k's fixed pattern plus
//                                      its own noise (as ImageBatches' synthetic images), its caption class k's
//                                      fixed sequence of seq_len ids in [2, vocab_size) (in [0, vocab_size) when
//                                      vocab_size <= 2), never CaptionSpec::reserved_token_id; every caption is
//                                      seq_len long (no padding: W ranks of B rows equal one rank of W*B); the
//                                      caption is
//                                      predictable from the image, so that the loss can fall
// Images are prepared as ImageBatches prepares them (with_preprocessor_config over CaptionSpec::image, then
// prepare_image: resized, scaled, normalized). Every row is checked before training starts (the JSON, ids in the
// vocabulary and not CaptionSpec::reserved_token_id (BLIP-2's image token: the model puts the query positions
// before each caption itself), at most seq_len of them, the image's header); a bad one is a ConfigError naming
// data=, the file, the line and what is wrong.
//
// A caption given as text (a table's, or "text" in captions.jsonl) is tokenized as the labs' processor does:
// tokenizer(text, truncation=True, max_length=M) with its special tokens, M = max_length (seq_len when -1): the
// text's ids cut so that with the special tokens they are at most M.
//
// Padding, per batch of one rank's B rows, T the longest input_ids among them:
//   input_ids       (B, T), pad_token_id after a row's end; attention_mask (B, T) 1 for a token, 0 for padding
//   labels, when no row of the batch has its own: with caption_targets=caption (B, T), the padded input_ids (pads
//                   included, so pad positions count in the loss): the labs' labels=input_ids with the tokenizer's
//                   ids, a loss over the caption's positions, conditioned on the image; with caption_targets=processor
//                   undefined, which tells the model to compute the loss of Blip2Processor's input_ids as labels (the
//                   query positions' image tokens, then the padded caption)
//   labels, when a row of the batch has its own: (B, L), L the longest of the rows' labels, where a row without its
//                   own labels counts its input_ids as its labels; each row is its labels (or its input_ids) and then
//                   -100 (ignored by the loss) after its end
// When the model's language model is decoder-only (CaptionSpec::labels_are_a_sequence false), a row's labels are one
// target per input position, so they must be exactly as long as its input_ids, and L = T.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/data/row_order.hpp"
#include "tessera/models/family_parts.hpp"

namespace tessera::data {

struct TableRows;

class CaptionBatches {
 public:
  CaptionBatches(const RunConfig& cfg, models::CaptionSpec spec, std::int64_t world_size);

  // Rank `rank`'s B rows of micro-step `micro` of step `step`, on `device`: pixels (B, C, S, S) fp32, input_ids,
  // attention_mask and labels (B, T) / (B, L) int64, padded as the header says. On the meta device (a dry run) the
  // pixels are shapes only: no image is decoded.
  models::CaptionBatch batch(std::int64_t step, std::int64_t micro, std::int64_t rank, c10::Device device) const;

  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t steps_per_epoch() const { return order_->steps_per_epoch(); }
  // The mean number of positions one optimizer step trains on: W * B * A * (prefix_positions + mean input length
  // + (labels_are_a_sequence ? mean label length : 0)), a row's label length that of its labels, or of its inputs
  // when it has none; the means over the rows an epoch reads, rounded to the nearest integer, at least 1.
  std::int64_t tokens_per_step() const { return tokens_per_step_; }
  std::string_view description() const { return description_; }
  std::int64_t size() const { return static_cast<std::int64_t>(inputs_.size()); }
  // The model's spec, its image settings with model_dir/preprocessor_config.json applied.
  const models::CaptionSpec& spec() const { return spec_; }
  // One row as the model sees it: its image (C, S, S) fp32, normalized; its input ids, unpadded; its own labels
  // (which may hold -100), unpadded, empty when the row has none (has_labels false: its input ids are its labels).
  at::Tensor image(std::int64_t row) const;
  const std::vector<std::int64_t>& input_ids(std::int64_t row) const { return inputs_[static_cast<std::size_t>(row)]; }
  const std::vector<std::int64_t>& labels(std::int64_t row) const { return labels_[static_cast<std::size_t>(row)]; }
  bool has_labels(std::int64_t row) const { return !labels(row).empty(); }

 private:
  models::CaptionSpec spec_;
  CaptionTargets targets_;
  std::int64_t batch_size_;
  std::uint64_t seed_;
  std::vector<std::filesystem::path> paths_;  // empty: synthetic or a table
  std::shared_ptr<const TableRows> table_;    // data= a table
  std::size_t image_column_ = 0;
  std::vector<std::int64_t> classes_;         // the synthetic rows' classes (their images' patterns)
  std::vector<std::vector<std::int64_t>> inputs_, labels_;
  std::string description_;
  std::unique_ptr<RowOrder> order_;
  std::int64_t total_steps_, tokens_per_step_;
};

}  // namespace tessera::data
