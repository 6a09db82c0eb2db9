#pragma once
// defines: tessera::data::ImageBatches, the data of the image classifiers (families whose Batch is
// models::ImageBatch), read in RowOrder's rank-independent row order:
//   data=DIR with DIR/labels.jsonl   one {"image": "images/0001.png", "label": 3} per line, paths relative to DIR
//   data=DIR of class directories    DIR/<class>/<image>, classes numbered in sorted name order (torchvision's
//                                    ImageFolder)
//   data=a table                     a datasets directory or Parquet (data/table_source.hpp): image_column= (an
//                                    Image feature: the file's bytes, decoded as Pillow does) and label_column= (an
//                                    integer or ClassLabel column), in TableRows' order (shuffle_seed=)
//   no data=                         a deterministic synthetic set: num_train_samples rows (512 when -1), each a
//                                    class's fixed pattern plus noise, so that the loss can fall
// Images are PNG or JPEG, made RGB, resized to image_size when their size differs (ImageSpec::resample, with
// antialiasing, as transformers' default image-processor backend (torchvision) does), scaled by 1/255 and normalized
// with the image processor's mean and std, which model_dir/preprocessor_config.json overrides. Every image is checked (exists, decodable header, label in range)
// before training starts; a bad one is a ConfigError naming the file, the line and what is wrong.
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

class ImageBatches {
 public:
  ImageBatches(const RunConfig& cfg, models::ImageSpec spec, std::int64_t world_size);

  // Rank `rank`'s rows of micro-step `micro` of step `step`: pixels (B, C, S, S) fp32 and labels (B,) int64. On the
  // meta device (a dry run) the pixels are shapes only: no image is decoded.
  models::ImageBatch batch(std::int64_t step, std::int64_t micro, std::int64_t rank, c10::Device device) const;

  std::int64_t total_steps() const { return total_steps_; }
  std::int64_t steps_per_epoch() const { return order_->steps_per_epoch(); }
  // Sequence positions (patches + CLS of every image, rank and micro-step) one optimizer step trains on.
  std::int64_t tokens_per_step() const { return tokens_per_step_; }
  std::string_view description() const { return description_; }
  std::int64_t size() const { return static_cast<std::int64_t>(labels_.size()); }
  const models::ImageSpec& spec() const { return spec_; }
  // One row as the model sees it: (C, S, S) fp32, normalized. Its label is label(row).
  at::Tensor image(std::int64_t row) const;
  std::int64_t label(std::int64_t row) const { return labels_[static_cast<std::size_t>(row)]; }

 private:
  models::ImageSpec spec_;
  std::int64_t batch_size_;
  std::uint64_t seed_;
  std::vector<std::filesystem::path> paths_;  // empty: synthetic or a table
  std::shared_ptr<const TableRows> table_;    // data= a table
  std::size_t image_column_ = 0;
  std::vector<std::int64_t> labels_;
  std::string description_;
  std::unique_ptr<RowOrder> order_;
  std::int64_t total_steps_, tokens_per_step_;
};

// The image processor's settings from DIR/preprocessor_config.json over `spec` (image_mean, image_std, resample,
// do_normalize); `spec` unchanged when the file is absent. FormatError for a file that says something tessera
// cannot do.
models::ImageSpec with_preprocessor_config(models::ImageSpec spec, const std::filesystem::path& model_dir);

// A decoded RGB image (height * width * 3 bytes) prepared as ImageBatches does: resized, scaled, normalized.
at::Tensor prepare_image(const std::uint8_t* rgb, std::int64_t width, std::int64_t height,
                         const models::ImageSpec& spec);

}  // namespace tessera::data
