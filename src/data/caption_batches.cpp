// implements: CaptionBatches (data/caption_batches.hpp).
#include "tessera/data/caption_batches.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/data/image_batches.hpp"
#include "tessera/data/jsonl_rows.hpp"
#include "tessera/data/synthetic_images.hpp"
#include "tessera/data/table_rows.hpp"
#include "tessera/io/image_file.hpp"
#include "tessera/io/image_orientation.hpp"
#include "tessera/io/json_file.hpp"
#include "tessera/text/tokenizer.hpp"

namespace tessera::data {
namespace fs = std::filesystem;
namespace {

constexpr std::int64_t kSyntheticRows = 512;
constexpr std::int64_t kSyntheticClasses = 16;
constexpr const char* kLineShape =
    "each line is {\"image\": \"images/0001.png\", \"input_ids\": [2, 37, 423]}, optionally with \"labels\": [...]";

constexpr detail::JsonlData kCaptions{"captions.jsonl", kLineShape, "image-to-text models",
                                       "one image and its caption's token ids per line, image paths relative to it"};

// One of "input_ids" / "labels" of a line, checked: a non-empty array of at most seq_len ids below vocab_size and
// other than the model's reserved id (labels may also hold -100, but not only -100).
std::vector<std::int64_t> read_ids(const nlohmann::json& j, const char* key, const std::string& where,
                                   const models::CaptionSpec& spec, std::int64_t seq_len) {
  const bool labels = std::string_view(key) == "labels";
  detail::TokenIdRules rules;
  rules.vocab_size = spec.vocab_size;
  rules.seq_len = seq_len;
  rules.labels = labels;
  rules.reserved_id = spec.reserved_token_id;
  rules.reserved_why = "the id the model reserves for its image token, which marks the query positions it puts before "
                       "each caption; give the caption's own token ids, without image tokens";
  rules.line_shape = kLineShape;
  rules.empty_fix = labels ? "leave \"labels\" out to train on the input ids, or give at least one target token id"
                           : "a caption needs at least one token";
  rules.all_ignored_fix = "give at least one target token id, or leave \"labels\" out to train on the input ids";
  return detail::read_token_ids(j, key, where, rules);
}

// `text` as the labs' processor tokenizes a caption: tokenizer(text, truncation=True, max_length=max_length), its
// special tokens (BOS / EOS) kept and the text's own ids cut to fit.
std::vector<std::int64_t> tokenize_caption(const text::Tokenizer& tokenizer, std::string_view text,
                                           std::int64_t max_length, const std::string& where) {
  std::vector<std::int64_t> ids = tokenizer.encode(text);
  const bool bos = tokenizer.add_bos_token() && tokenizer.bos_id();
  const bool eos = tokenizer.add_eos_token() && tokenizer.eos_id();
  const std::int64_t specials = (bos ? 1 : 0) + (eos ? 1 : 0);
  if (max_length <= specials)
    throw ConfigError(where + ": max_length=" + std::to_string(max_length) + " leaves no room for the caption beside "
                      "the tokenizer's " + std::to_string(specials) + " special token(s); give a larger max_length");
  if (static_cast<std::int64_t>(ids.size()) > max_length - specials)
    ids.resize(static_cast<std::size_t>(max_length - specials));
  if (bos) ids.insert(ids.begin(), *tokenizer.bos_id());
  if (eos) ids.push_back(*tokenizer.eos_id());
  return ids;
}

// The captions of a table (data/table_rows.hpp), tokenized, and every image's header probed.
void read_caption_table(const RunConfig& cfg, const TableRows& table, std::size_t image_column,
                        const models::CaptionSpec& spec, std::int64_t max_length,
                        std::vector<std::vector<std::int64_t>>& inputs) {
  const std::string source = cfg.tokenizer.empty() ? cfg.model_dir : cfg.tokenizer;
  const std::size_t text_column = table.table->column(cfg.text_column, ColumnKind::text, "text_column");
  if (source.empty())
    throw ConfigError("data=" + cfg.data + ": the captions are text, which needs the model's tokenizer; give "
                      "model_dir=DIR or tokenizer=DIR");
  const text::Tokenizer tokenizer = text::Tokenizer::load(source);
  for (std::int64_t r = 0; r < table.size(); ++r) {
    const std::int64_t row = table.row(r);
    const std::string where = table.table->where(row, text_column);
    const nlohmann::json ids{
        {"input_ids", tokenize_caption(tokenizer, table.table->text(row, text_column), max_length, where)}};
    inputs.push_back(read_ids(ids, "input_ids", where + " (as tokenized by " + tokenizer.source().string() + ")",
                              spec, cfg.seq_len));
    const auto bytes = table.table->image_bytes(row, image_column);
    try {
      io::probe_image(bytes, table.table->where(row, image_column));
    } catch (const FormatError& e) {
      throw ConfigError("data=" + cfg.data + ": " + e.what());
    }
  }
}

// The rows of a captions.jsonl file, every line checked and every image probed (header only).
void read_captions_jsonl(const std::string& data, const fs::path& file, const models::CaptionSpec& spec,
                         std::int64_t seq_len, std::int64_t max_length, const std::string& tokenizer_source,
                         std::vector<fs::path>& paths,
                         std::vector<std::vector<std::int64_t>>& inputs,
                         std::vector<std::vector<std::int64_t>>& labels) {
  const fs::path dir = file.parent_path();
  std::optional<text::Tokenizer> tokenizer;  // loaded at the first text caption
  io::for_each_json_line(file, kLineShape, [&](const std::string& where, const nlohmann::json& j) {
    if (!j.contains("image") || !j.at("image").is_string())
      throw ConfigError(where + ": \"image\" must be the image's path (a string), relative to " + dir.string());
    std::vector<std::int64_t> in;
    if (!j.contains("input_ids") && j.contains("text")) {
      // A text caption, tokenized as the model's processor does (its tokenizer's special tokens added).
      if (!j.at("text").is_string())
        throw ConfigError(where + ": \"text\" must be the caption (a string); " + kLineShape);
      if (tokenizer_source.empty())
        throw ConfigError(where + ": a text caption (\"text\"), which needs the model's tokenizer; give model_dir=DIR "
                          "or tokenizer=DIR, or give the caption's token ids as \"input_ids\"");
      if (!tokenizer) tokenizer = text::Tokenizer::load(tokenizer_source);
      const nlohmann::json ids{
          {"input_ids", tokenize_caption(*tokenizer, j.at("text").get<std::string>(), max_length, where)}};
      in = read_ids(ids, "input_ids", where + " (\"text\" as tokenized by " + tokenizer->source().string() + ")",
                    spec, seq_len);
    } else {
      in = read_ids(j, "input_ids", where, spec, seq_len);
    }
    std::vector<std::int64_t> lab;
    if (j.contains("labels")) {
      lab = read_ids(j, "labels", where, spec, seq_len);
      if (!spec.labels_are_a_sequence && lab.size() != in.size())
        throw ConfigError(where + ": \"labels\" has " + std::to_string(lab.size()) + " ids but \"input_ids\" has " +
                          std::to_string(in.size()) + "; the model's language model is decoder-only, so its labels "
                          "are one target per input position (-100 where none): give as many as \"input_ids\", or "
                          "leave \"labels\" out to train on the input ids");
    }
    const fs::path image = dir / j.at("image").get<std::string>();
    try {
      io::probe_image(image);
    } catch (const FormatError& e) {
      throw ConfigError("data=" + data + ": " + where + ": " + e.what());
    }
    paths.push_back(image);
    inputs.push_back(std::move(in));
    labels.push_back(std::move(lab));
  });
}

}  // namespace

CaptionBatches::CaptionBatches(const RunConfig& cfg, models::CaptionSpec spec, std::int64_t world_size)
    : spec_(spec), targets_(cfg.caption_targets), batch_size_(cfg.batch_size),
      seed_(static_cast<std::uint64_t>(cfg.seed)) {
  spec_.image = with_preprocessor_config(spec_.image, cfg.model_dir);
  if (spec_.image.channels != 3 && spec_.image.channels != 1)
    throw ConfigError("the model takes " + std::to_string(spec_.image.channels) +
                      "-channel images; tessera's image data gives RGB (3) or gray (1)");
  if (spec_.vocab_size < 1)
    throw ConfigError("the model's vocab_size is " + std::to_string(spec_.vocab_size) +
                      "; fix vocab_size in its config.json");
  if (spec_.pad_token_id < 0 || spec_.pad_token_id >= spec_.vocab_size)
    throw ConfigError("the model's pad_token_id " + std::to_string(spec_.pad_token_id) +
                      " is not a token id of its vocabulary (0 to " + std::to_string(spec_.vocab_size - 1) +
                      "); fix pad_token_id in its config.json");
  if (cfg.seq_len < 1)
    throw ConfigError("seq_len is " + std::to_string(cfg.seq_len) + "; it must be >= 1 (the longest caption in "
                      "tokens)");
  const std::int64_t max_length = cfg.max_length > 0 ? cfg.max_length : cfg.seq_len;
  if (cfg.data.empty()) {
    const std::int64_t rows = cfg.num_train_samples > 0 ? cfg.num_train_samples : kSyntheticRows;
    // Every caption seq_len tokens long: no padding, so that W ranks of B rows compute what one rank of W * B rows
    // does (with padding inside the loss they cannot: each rank pads its own rows; see docs/config.md).
    // Each class's fixed caption of seq_len ids; 0 and 1 (pad, bos or eos in most vocabularies) are avoided when the
    // vocabulary allows, and the model's reserved id (BLIP-2's image token) always.
    const std::int64_t low = spec_.vocab_size > 2 ? 2 : 0;
    const std::int64_t reserved = spec_.reserved_token_id;
    const bool skip = reserved >= low && reserved < spec_.vocab_size;
    if (skip && spec_.vocab_size - low < 2)
      throw ConfigError("the model's vocabulary (" + std::to_string(spec_.vocab_size) + " ids) leaves no token id for "
                        "synthetic captions beside its reserved id " + std::to_string(reserved) +
                        "; use a model with a larger vocab_size, or give data=");
    const auto span = static_cast<std::uint64_t>(spec_.vocab_size - low - (skip ? 1 : 0));
    std::vector<std::vector<std::int64_t>> captions(static_cast<std::size_t>(kSyntheticClasses));
    for (std::size_t k = 0; k < captions.size(); ++k) {
      const std::uint64_t base = detail::mix(seed_ ^ (0xc2b2ae3d27d4eb4full * static_cast<std::uint64_t>(k + 1)));
      for (std::int64_t i = 0; i < cfg.seq_len; ++i) {
        std::int64_t id = low + static_cast<std::int64_t>(detail::mix(base + static_cast<std::uint64_t>(i)) % span);
        if (skip && id >= reserved) ++id;  // the ids above the reserved one move up by one
        captions[k].push_back(id);
      }
    }
    // Row r hashes (seed, r) alone: the same row whatever the world size or num_train_samples.
    inputs_.resize(static_cast<std::size_t>(rows));
    labels_.resize(static_cast<std::size_t>(rows));
    classes_.resize(static_cast<std::size_t>(rows));
    for (std::size_t r = 0; r < inputs_.size(); ++r) {
      const std::uint64_t hash = detail::mix(seed_ ^ detail::mix(static_cast<std::uint64_t>(r)));
      const auto k = static_cast<std::size_t>(hash % static_cast<std::uint64_t>(kSyntheticClasses));
      classes_[r] = static_cast<std::int64_t>(k);
      inputs_[r] = captions[k];
    }
    description_ = "synthetic captions: " + std::to_string(rows) + " images " + std::to_string(spec_.image.channels) +
                   "x" + std::to_string(spec_.image.image_size) + "x" + std::to_string(spec_.image.image_size) +
                   " (" + std::to_string(kSyntheticClasses) + " classes), captions of " + std::to_string(cfg.seq_len) +
                   " tokens (seed " + std::to_string(cfg.seed) + ")";
  } else if (TableSource::recognizes(cfg.data)) {
    table_ = std::make_shared<const TableRows>(TableRows::open(cfg));
    image_column_ = table_->table->column(cfg.image_column, ColumnKind::image, "image_column");
    read_caption_table(cfg, *table_, image_column_, spec_, max_length, inputs_);
    labels_.resize(inputs_.size());
    description_ = table_->description();
  } else {
    const fs::path file = detail::jsonl_data_file(cfg.data, kCaptions);
    read_captions_jsonl(cfg.data, file, spec_, cfg.seq_len, max_length,
                        cfg.tokenizer.empty() ? cfg.model_dir : cfg.tokenizer, paths_, inputs_, labels_);
    if (inputs_.empty())
      throw ConfigError("data=" + cfg.data + ": " + file.string() + " has no rows; " + kLineShape);
    description_ = file.filename().string() + " in " + file.parent_path().string() + " (" +
                   std::to_string(inputs_.size()) + " captions)";
  }
  order_ = std::make_unique<RowOrder>(size(), BatchShape{world_size, cfg.batch_size, 2, cfg.accumulate_grad_batches},
                                      cfg.num_train_samples, cfg.limit_train_batches, description_, cfg.data_order,
                                      static_cast<std::uint64_t>(cfg.seed));
  total_steps_ = order_->total_steps(cfg.max_epochs, cfg.max_steps);
  // The means over the rows an epoch reads: rows [0, rows_per_epoch()).
  const std::int64_t read = order_->rows_per_epoch();
  double positions = 0.0;
  for (std::int64_t r = 0; r < read; ++r) {
    positions += static_cast<double>(spec_.prefix_positions) + static_cast<double>(input_ids(r).size());
    if (spec_.labels_are_a_sequence)
      positions += static_cast<double>(has_labels(r) ? labels(r).size() : input_ids(r).size());
  }
  const double per_step = static_cast<double>(world_size) * static_cast<double>(cfg.batch_size) *
                          static_cast<double>(cfg.accumulate_grad_batches) * positions / static_cast<double>(read);
  tokens_per_step_ = std::max<std::int64_t>(1, std::llround(per_step));
}

at::Tensor CaptionBatches::image(std::int64_t row) const {
  if (table_) {
    const std::int64_t r = table_->row(row);
    // As datasets' Image feature decodes it for the labs: EXIF orientation applied.
    const auto bytes = table_->table->image_bytes(r, image_column_);
    const io::RgbImage img =
        io::oriented(io::decode_image(bytes, table_->table->where(r, image_column_)), io::exif_orientation(bytes));
    return prepare_image(img.pixels.data(), img.width, img.height, spec_.image);
  }
  if (paths_.empty())  // its class's fixed pattern plus its own noise (data/synthetic_images.hpp)
    return detail::synthetic_image(spec_.image, seed_, classes_[static_cast<std::size_t>(row)], row);
  const io::RgbImage img = io::read_image(paths_[static_cast<std::size_t>(row)]);
  return prepare_image(img.pixels.data(), img.width, img.height, spec_.image);
}

models::CaptionBatch CaptionBatches::batch(std::int64_t step, std::int64_t micro, std::int64_t rank,
                                           c10::Device device) const {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(batch_size_));
  // A dry run's batch (the meta device) has shapes only: its images are not decoded (one decode per image an epoch).
  const bool shapes_only = device.is_meta();
  std::vector<at::Tensor> images;
  std::size_t t = 1, l = 1;
  bool any_labels = false;
  for (std::int64_t i = 0; i < batch_size_; ++i) {
    const std::int64_t row = order_->row(step, micro, rank, i);
    rows[static_cast<std::size_t>(i)] = row;
    if (!shapes_only) images.push_back(image(row));
    t = std::max(t, input_ids(row).size());
    // A row without its own labels takes its input ids as its labels.
    l = std::max(l, has_labels(row) ? labels(row).size() : input_ids(row).size());
    any_labels = any_labels || has_labels(row);
  }
  const auto options = at::TensorOptions().dtype(at::kLong);
  const auto T = static_cast<std::int64_t>(t), L = static_cast<std::int64_t>(l);
  at::Tensor inputs = at::full({batch_size_, T}, spec_.pad_token_id, options);
  at::Tensor mask = at::zeros({batch_size_, T}, options);
  std::int64_t* in = inputs.data_ptr<std::int64_t>();
  std::int64_t* m = mask.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < batch_size_; ++i) {
    const auto& x = input_ids(rows[static_cast<std::size_t>(i)]);
    std::copy(x.begin(), x.end(), in + i * T);
    std::fill(m + i * T, m + i * T + static_cast<std::int64_t>(x.size()), std::int64_t{1});
  }
  // Without any row's own labels: the padded input_ids (caption targets), or undefined, which has the model take
  // the processor's input_ids (image tokens, then the caption) as labels.
  at::Tensor labels;
  if (!any_labels && targets_ == CaptionTargets::caption) labels = inputs.clone();
  if (any_labels) {
    labels = at::full({batch_size_, L}, models::kIgnoreIndex, options);
    std::int64_t* lab = labels.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < batch_size_; ++i) {
      const std::int64_t row = rows[static_cast<std::size_t>(i)];
      const auto& y = has_labels(row) ? this->labels(row) : input_ids(row);
      std::copy(y.begin(), y.end(), lab + i * L);
    }
  }
  const std::int64_t side = spec_.image.image_size;
  at::Tensor pixels = shapes_only ? at::empty({batch_size_, spec_.image.channels, side, side},
                                              at::TensorOptions().dtype(at::kFloat).device(device))
                                  : at::stack(images).to(device);
  return {pixels, inputs.to(device), mask.to(device), labels.defined() ? labels.to(device) : labels};
}

}  // namespace tessera::data
