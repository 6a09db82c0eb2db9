// implements: ImageBatches, with_preprocessor_config and prepare_image (data/image_batches.hpp).
#include "tessera/data/image_batches.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/data/synthetic_images.hpp"
#include "tessera/data/table_rows.hpp"
#include "tessera/io/image_file.hpp"
#include "tessera/io/image_orientation.hpp"
#include "tessera/io/json_file.hpp"

namespace tessera::data {
namespace fs = std::filesystem;
namespace {

constexpr std::int64_t kSyntheticRows = 512;

// The rows of labels.jsonl: "image" (a path relative to DIR) and "label" (a class id below num_labels).
void read_labels_jsonl(const fs::path& dir, std::int64_t num_labels, std::vector<fs::path>& paths,
                       std::vector<std::int64_t>& labels) {
  const fs::path file = dir / "labels.jsonl";
  io::for_each_json_line(file, "each line is {\"image\": \"images/0001.png\", \"label\": 3}",
                         [&](const std::string& where, const nlohmann::json& j) {
    if (!j.contains("image") || !j.at("image").is_string())
      throw ConfigError(where + ": \"image\" must be the image's path (a string), relative to " + dir.string());
    if (!j.contains("label") || !j.at("label").is_number_integer())
      throw ConfigError(where + ": \"label\" must be an integer class id, got " +
                        (j.contains("label") ? io::json_excerpt(j.at("label"), 40) : std::string("nothing")));
    // An unsigned value beyond int64 (2^64-1) must not wrap to a negative id in the check or the message.
    const nlohmann::json& value = j.at("label");
    const bool huge = value.is_number_unsigned() &&
                      value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    const std::int64_t label = huge ? std::numeric_limits<std::int64_t>::max() : value.get<std::int64_t>();
    if (label < 0 || label >= num_labels)
      throw ConfigError(where + ": label " + io::json_excerpt(value, 40) + " is not a class of the model, which has " +
                        std::to_string(num_labels) + " (ids 0 to " + std::to_string(num_labels - 1) + ")");
    paths.push_back(dir / j.at("image").get<std::string>());
    labels.push_back(label);
  });
}

// torchvision's ImageFolder: DIR/<class>/<file>, classes in sorted name order, files in sorted order per class.
void read_image_folder(const fs::path& dir, std::int64_t num_labels, std::vector<fs::path>& paths,
                       std::vector<std::int64_t>& labels) {
  std::vector<fs::path> classes;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) classes.push_back(e.path());
  std::sort(classes.begin(), classes.end());
  if (classes.empty())
    throw ConfigError("data=" + dir.string() + ": neither labels.jsonl nor class directories (DIR/<class>/<image>) in "
                      "it; see docs/config.md for the image data layouts");
  if (static_cast<std::int64_t>(classes.size()) > num_labels)
    throw ConfigError("data=" + dir.string() + ": " + std::to_string(classes.size()) +
                      " class directories but the model has " + std::to_string(num_labels) +
                      " classes; use a model with as many (its config.json's id2label) or fewer directories");
  for (std::size_t k = 0; k < classes.size(); ++k) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(classes[k]))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      paths.push_back(f);
      labels.push_back(static_cast<std::int64_t>(k));
    }
  }
}

}  // namespace

models::ImageSpec with_preprocessor_config(models::ImageSpec spec, const fs::path& model_dir) {
  const fs::path file = model_dir / "preprocessor_config.json";
  std::error_code ec;
  if (model_dir.empty() || !fs::exists(file, ec)) return spec;
  const nlohmann::json j = io::read_json_file(file, "the image processor's settings of a Hugging Face model dir");
  const std::string where = file.string();
  auto triple = [&](const char* key, std::array<double, 3>& out) {
    if (!j.contains(key)) return;
    const auto& v = j.at(key);
    if (v.is_number()) {
      out.fill(v.get<double>());
    } else if (v.is_array() && v.size() == 3 && std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_number(); })) {
      for (std::size_t i = 0; i < 3; ++i) out[i] = v[i].get<double>();
    } else {
      throw FormatError(where + ": \"" + key + "\" must be a number or 3 numbers (one per RGB channel), got " +
                        io::json_excerpt(v, 80));
    }
  };
  triple("image_mean", spec.mean);
  triple("image_std", spec.std);
  for (double s : spec.std)
    if (!(s > 0)) throw FormatError(where + ": \"image_std\" must be > 0 per channel");
  if (j.contains("do_normalize") && j.at("do_normalize").is_boolean() && !j.at("do_normalize").get<bool>()) {
    spec.mean.fill(0.0);
    spec.std.fill(1.0);
  }
  if (j.contains("resample") && !j.at("resample").is_null()) {
    const auto& r = j.at("resample");
    // PIL's numbering, as transformers writes it: 2 = BILINEAR, 3 = BICUBIC.
    if (r == 2) spec.resample = models::Resample::bilinear;
    else if (r == 3) spec.resample = models::Resample::bicubic;
    else
      throw FormatError(where + ": \"resample\" " + io::json_excerpt(r, 40) +
                        " is not supported; tessera resizes with 2 (bilinear) or 3 (bicubic)");
  }
  return spec;
}

at::Tensor prepare_image(const std::uint8_t* rgb, std::int64_t width, std::int64_t height,
                         const models::ImageSpec& spec) {
  // (H, W, 3) bytes -> (1, 3, H, W), channels last as the bytes lie.
  at::Tensor x = at::from_blob(const_cast<std::uint8_t*>(rgb), {height, width, 3}, at::kByte).permute({2, 0, 1}).unsqueeze(0);
  if (height != spec.image_size || width != spec.image_size) {
    // transformers' default image-processor backend resizes the 8-bit image with torchvision, whose CPU path is
    // ATen's antialiased uint8 kernel (8-bit in, 8-bit out): the same kernel here, so that the pixels agree exactly.
    const std::vector<std::int64_t> size{spec.image_size, spec.image_size};
    x = spec.resample == models::Resample::bicubic ? at::_upsample_bicubic2d_aa(x, size, false)
                                                   : at::_upsample_bilinear2d_aa(x, size, false);
  }
  x = x.squeeze(0).to(at::kFloat) / 255.0;
  if (spec.channels == 1) x = x.mean(0, /*keepdim=*/true);
  return detail::normalize(x, spec);
}

ImageBatches::ImageBatches(const RunConfig& cfg, models::ImageSpec spec, std::int64_t world_size)
    : spec_(with_preprocessor_config(spec, cfg.model_dir)),
      batch_size_(cfg.batch_size),
      seed_(static_cast<std::uint64_t>(cfg.seed)) {
  if (spec_.channels != 3 && spec_.channels != 1)
    throw ConfigError("the model takes " + std::to_string(spec_.channels) +
                      "-channel images; tessera's image data gives RGB (3) or gray (1)");
  if (cfg.data.empty()) {
    const std::int64_t rows = cfg.num_train_samples > 0 ? cfg.num_train_samples : kSyntheticRows;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::uint64_t hash = detail::mix(seed_ ^ detail::mix(static_cast<std::uint64_t>(r)));
      labels_.push_back(static_cast<std::int64_t>(hash % static_cast<std::uint64_t>(spec_.num_labels)));
    }
    description_ = "synthetic images: " + std::to_string(rows) + " of " + std::to_string(spec_.channels) + "x" +
                   std::to_string(spec_.image_size) + "x" + std::to_string(spec_.image_size) + ", " +
                   std::to_string(spec_.num_labels) + " classes (seed " + std::to_string(cfg.seed) + ")";
  } else if (TableSource::recognizes(cfg.data)) {
    table_ = std::make_shared<const TableRows>(TableRows::open(cfg));
    const TableSource& table = *table_->table;
    image_column_ = table.column(cfg.image_column, ColumnKind::image, "image_column");
    const std::size_t label_column = table.column(cfg.label_column, ColumnKind::integer, "label_column");
    for (std::int64_t r = 0; r < table_->size(); ++r) {
      const std::int64_t row = table_->row(r), label = table.integer(row, label_column);
      if (label < 0 || label >= spec_.num_labels)
        throw ConfigError("data=" + cfg.data + ": " + table.where(row, label_column) + " is " +
                          std::to_string(label) + ", not a class of the model (0 to " +
                          std::to_string(spec_.num_labels - 1) + "); give a model whose num_labels covers them");
      try {
        io::probe_image(table.image_bytes(row, image_column_), table.where(row, image_column_));
      } catch (const FormatError& e) {
        throw ConfigError("data=" + cfg.data + ": " + e.what());
      }
      labels_.push_back(label);
    }
    description_ = table_->description();
  } else {
    const fs::path dir(cfg.data);
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      throw ConfigError("data=" + cfg.data + ": image data is a directory (labels.jsonl, or one directory per class), "
                        "not a file; token files are for the language models");
    const bool jsonl = fs::exists(dir / "labels.jsonl", ec);
    if (jsonl) read_labels_jsonl(dir, spec_.num_labels, paths_, labels_);
    else read_image_folder(dir, spec_.num_labels, paths_, labels_);
    if (paths_.empty()) throw ConfigError("data=" + cfg.data + ": no images in it");
    for (std::size_t i = 0; i < paths_.size(); ++i) {
      try {
        io::probe_image(paths_[i]);
      } catch (const FormatError& e) {
        throw ConfigError(std::string("data=") + cfg.data + ": " +
                          (jsonl ? "labels.jsonl row " + std::to_string(i + 1) + ": " : std::string()) + e.what());
      }
    }
    description_ = std::string(jsonl ? "labels.jsonl" : "image folder") + " in " + cfg.data + ": " +
                   std::to_string(paths_.size()) + " images";
  }
  order_ = std::make_unique<RowOrder>(size(), BatchShape{world_size, cfg.batch_size, 2, cfg.accumulate_grad_batches},
                                      cfg.num_train_samples, cfg.limit_train_batches, description_, cfg.data_order,
                                      static_cast<std::uint64_t>(cfg.seed));
  total_steps_ = order_->total_steps(cfg.max_epochs, cfg.max_steps);
  tokens_per_step_ = world_size * cfg.batch_size * cfg.accumulate_grad_batches * std::max<std::int64_t>(1, spec_.positions);
}

at::Tensor ImageBatches::image(std::int64_t row) const {
  if (table_) {
    const std::int64_t r = table_->row(row);
    // As datasets' Image feature decodes it for the labs: EXIF orientation applied.
    const auto bytes = table_->table->image_bytes(r, image_column_);
    const io::RgbImage img =
        io::oriented(io::decode_image(bytes, table_->table->where(r, image_column_)), io::exif_orientation(bytes));
    return prepare_image(img.pixels.data(), img.width, img.height, spec_);
  }
  if (paths_.empty()) {
    // Its class's fixed pattern plus its own noise (data/synthetic_images.hpp).
    return detail::synthetic_image(spec_, seed_, labels_[static_cast<std::size_t>(row)], row);
  }
  const io::RgbImage img = io::read_image(paths_[static_cast<std::size_t>(row)]);
  return prepare_image(img.pixels.data(), img.width, img.height, spec_);
}

models::ImageBatch ImageBatches::batch(std::int64_t step, std::int64_t micro, std::int64_t rank, c10::Device device) const {
  // A dry run's batch (the meta device) has shapes and no values: its images are not decoded, which leaves the
  // run's own read the one decode of each image in the epoch.
  const bool shapes_only = device.is_meta();
  std::vector<at::Tensor> images;
  at::Tensor labels = at::empty({batch_size_}, at::TensorOptions().dtype(at::kLong));
  for (std::int64_t i = 0; i < batch_size_; ++i) {
    const std::int64_t row = order_->row(step, micro, rank, i);
    if (!shapes_only) images.push_back(image(row));
    labels.data_ptr<std::int64_t>()[i] = label(row);
  }
  at::Tensor pixels = shapes_only ? at::empty({batch_size_, spec_.channels, spec_.image_size, spec_.image_size},
                                              at::TensorOptions().dtype(at::kFloat).device(device))
                                  : at::stack(images).to(device);
  return {pixels, labels.to(device)};
}

}  // namespace tessera::data
