// implements: Seq2SeqBatches (data/seq2seq_batches.hpp).
#include "tessera/data/seq2seq_batches.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/data/jsonl_rows.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/text/tokenizer.hpp"

namespace tessera::data {
namespace fs = std::filesystem;
namespace {

constexpr std::int64_t kSyntheticRows = 512;
constexpr const char* kLineShape = "each line is {\"input_ids\": [37, 423, 1], \"labels\": [8, 1]}";

constexpr detail::JsonlData kPairs{"pairs.jsonl", kLineShape, "sequence-to-sequence models",
                                    "one pair of token ids per line"};

// One of "input_ids" / "labels" of a line, checked: a non-empty array of at most seq_len ids below vocab_size
// (labels may also hold -100).
std::vector<std::int64_t> read_ids(const nlohmann::json& j, const char* key, const std::string& where,
                                   const models::Seq2SeqSpec& spec, std::int64_t seq_len) {
  const bool labels = std::string_view(key) == "labels";
  detail::TokenIdRules rules;
  rules.vocab_size = spec.vocab_size;
  rules.seq_len = seq_len;
  rules.labels = labels;
  rules.line_shape = kLineShape;
  rules.empty_fix = labels ? "a pair needs at least one target token (end it with the tokenizer's eos)"
                           : "a pair needs at least one input token (end it with the tokenizer's eos)";
  rules.all_ignored_fix = "give at least one target token id";
  return detail::read_token_ids(j, key, where, rules);
}

// The rows of a pairs.jsonl file, every line checked.
void read_pairs_jsonl(const fs::path& file, const models::Seq2SeqSpec& spec, std::int64_t seq_len,
                      const std::string& tokenizer_source, std::vector<std::vector<std::int64_t>>& inputs,
                      std::vector<std::vector<std::int64_t>>& labels) {
  std::optional<text::Tokenizer> tokenizer;  // loaded at the first text pair
  io::for_each_json_line(file, kLineShape, [&](const std::string& where, const nlohmann::json& j) {
    if (!j.contains("input_ids") && (j.contains("input") || j.contains("target"))) {
      // A text pair, tokenized as transformers' tokenizer(input, text_target=target) does (T5: EOS appended).
      for (const char* key : {"input", "target"})
        if (!j.contains(key) || !j.at(key).is_string())
          throw ConfigError(where + ": a text pair needs \"input\" and \"target\", both strings; or give token "
                            "ids: " + kLineShape);
      if (tokenizer_source.empty())
        throw ConfigError(where + ": a text pair (\"input\"/\"target\"), which needs the model's tokenizer; give "
                          "model_dir=DIR or tokenizer=DIR, or give token ids: " + kLineShape);
      if (!tokenizer) tokenizer = text::Tokenizer::load(tokenizer_source);
      const nlohmann::json ids{{"input_ids", tokenizer->encode_with_special(j.at("input").get<std::string>())},
                               {"labels", tokenizer->encode_with_special(j.at("target").get<std::string>())}};
      const std::string tokenized = where + " (as tokenized by " + tokenizer->source().string() + ")";
      inputs.push_back(read_ids(ids, "input_ids", tokenized, spec, seq_len));
      labels.push_back(read_ids(ids, "labels", tokenized, spec, seq_len));
      return;
    }
    inputs.push_back(read_ids(j, "input_ids", where, spec, seq_len));
    labels.push_back(read_ids(j, "labels", where, spec, seq_len));
  });
}

}  // namespace

Seq2SeqBatches::Seq2SeqBatches(const RunConfig& cfg, models::Seq2SeqSpec spec, std::int64_t world_size)
    : spec_(spec), batch_size_(cfg.batch_size) {
  if (spec_.vocab_size < 1)
    throw ConfigError("the model's vocab_size is " + std::to_string(spec_.vocab_size) +
                      "; fix vocab_size in its config.json");
  if (spec_.pad_token_id < 0 || spec_.pad_token_id >= spec_.vocab_size)
    throw ConfigError("the model's pad_token_id " + std::to_string(spec_.pad_token_id) +
                      " is not a token id of its vocabulary (0 to " + std::to_string(spec_.vocab_size - 1) +
                      "); fix pad_token_id in its config.json");
  if (cfg.seq_len < 1)
    throw ConfigError("seq_len is " + std::to_string(cfg.seq_len) + "; it must be >= 1 (the longest row in tokens)");
  if (cfg.data.empty()) {
    const std::int64_t rows = cfg.num_train_samples > 0 ? cfg.num_train_samples : kSyntheticRows;
    const std::int64_t label_len = std::max<std::int64_t>(1, cfg.seq_len / 2);
    // 0 is T5's pad and 1 its eos: the copied tokens avoid both when the vocabulary allows.
    const std::int64_t low = spec_.vocab_size > 2 ? 2 : 0;
    const auto span = static_cast<std::uint64_t>(spec_.vocab_size - low);
    // One generator over the rows in order: row r is the same whatever the world size or num_train_samples.
    at::CPUGeneratorImpl gen(static_cast<std::uint64_t>(cfg.seed));
    inputs_.resize(static_cast<std::size_t>(rows));
    labels_.resize(static_cast<std::size_t>(rows));
    for (std::size_t r = 0; r < inputs_.size(); ++r) {
      auto& in = inputs_[r];
      in.resize(static_cast<std::size_t>(cfg.seq_len));
      for (auto& id : in) id = low + static_cast<std::int64_t>(gen.random64() % span);
      labels_[r].assign(in.begin(), in.begin() + label_len);
    }
    description_ = "synthetic copy task (" + std::to_string(rows) + " pairs, " + std::to_string(cfg.seq_len) +
                   " -> " + std::to_string(label_len) + " tokens, seed " + std::to_string(cfg.seed) + ")";
  } else {
    const fs::path file = detail::jsonl_data_file(cfg.data, kPairs);
    read_pairs_jsonl(file, spec_, cfg.seq_len, cfg.tokenizer.empty() ? cfg.model_dir : cfg.tokenizer, inputs_, labels_);
    if (inputs_.empty())
      throw ConfigError("data=" + cfg.data + ": " + file.string() + " has no rows; " + kLineShape);
    description_ = file.filename().string() + " in " + file.parent_path().string() + " (" +
                   std::to_string(inputs_.size()) + " pairs)";
  }
  order_ = std::make_unique<RowOrder>(size(), BatchShape{world_size, cfg.batch_size, 2, cfg.accumulate_grad_batches},
                                      cfg.num_train_samples, cfg.limit_train_batches, description_, cfg.data_order,
                                      static_cast<std::uint64_t>(cfg.seed));
  total_steps_ = order_->total_steps(cfg.max_epochs, cfg.max_steps);
  // The means over the rows an epoch reads: rows [0, rows_per_epoch()).
  const std::int64_t read = order_->rows_per_epoch();
  double tokens = 0.0;
  for (std::int64_t r = 0; r < read; ++r) tokens += static_cast<double>(input_ids(r).size() + labels(r).size());
  const double per_step = static_cast<double>(world_size) * static_cast<double>(cfg.batch_size) *
                          static_cast<double>(cfg.accumulate_grad_batches) * tokens / static_cast<double>(read);
  tokens_per_step_ = std::max<std::int64_t>(1, std::llround(per_step));
}

models::Seq2SeqBatch Seq2SeqBatches::batch(std::int64_t step, std::int64_t micro, std::int64_t rank,
                                           c10::Device device) const {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(batch_size_));
  std::size_t s = 1, l = 1;
  for (std::int64_t i = 0; i < batch_size_; ++i) {
    const std::int64_t row = order_->row(step, micro, rank, i);
    rows[static_cast<std::size_t>(i)] = row;
    s = std::max(s, input_ids(row).size());
    l = std::max(l, labels(row).size());
  }
  const auto options = at::TensorOptions().dtype(at::kLong);
  const auto S = static_cast<std::int64_t>(s), L = static_cast<std::int64_t>(l);
  at::Tensor inputs = at::full({batch_size_, S}, spec_.pad_token_id, options);
  at::Tensor mask = at::zeros({batch_size_, S}, options);
  at::Tensor labels = at::full({batch_size_, L}, models::kIgnoreIndex, options);
  std::int64_t* in = inputs.data_ptr<std::int64_t>();
  std::int64_t* m = mask.data_ptr<std::int64_t>();
  std::int64_t* lab = labels.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < batch_size_; ++i) {
    const auto& x = input_ids(rows[static_cast<std::size_t>(i)]);
    const auto& y = this->labels(rows[static_cast<std::size_t>(i)]);
    std::copy(x.begin(), x.end(), in + i * S);
    std::fill(m + i * S, m + i * S + static_cast<std::int64_t>(x.size()), std::int64_t{1});
    std::copy(y.begin(), y.end(), lab + i * L);
  }
  return {inputs.to(device), mask.to(device), labels.to(device)};
}

}  // namespace tessera::data
