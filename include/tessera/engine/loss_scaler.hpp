#pragma once
// defines: LossScaler, dynamic loss scaling for fp16 (the policy torch.cuda.amp.GradScaler follows).
// The loss is multiplied by `scale` before backward so small gradients survive fp16; gradients are
// divided by it before the optimizer step. A step whose gradients hold an inf or nan is skipped and the
// scale halved; after `growth_interval` good steps in a row the scale doubles.
#include <cstdint>

namespace tessera {

class LossScaler {
 public:
  static constexpr double initial_scale = 65536.0;  // 2^16
  static constexpr std::int64_t growth_interval = 2000;

  double scale() const { return scale_; }
  std::int64_t skipped_steps() const { return skipped_; }
  std::int64_t growths() const { return growths_; }
  std::int64_t good_in_a_row() const { return good_in_a_row_; }
  // A resumed run's scaler (engine/train_state.hpp): exactly where the checkpointed run left it.
  void restore(double scale, std::int64_t good_in_a_row, std::int64_t skipped, std::int64_t growths) {
    scale_ = scale;
    good_in_a_row_ = good_in_a_row;
    skipped_ = skipped;
    growths_ = growths;
  }

  // Records the outcome of one optimizer step; returns true when the step may be applied.
  bool update(bool gradients_finite) {
    if (!gradients_finite) {
      scale_ *= 0.5;
      good_in_a_row_ = 0;
      ++skipped_;
      return false;
    }
    if (++good_in_a_row_ == growth_interval) {
      scale_ *= 2.0;
      good_in_a_row_ = 0;
      ++growths_;
    }
    return true;
  }

 private:
  double scale_ = initial_scale;
  std::int64_t good_in_a_row_ = 0;
  std::int64_t skipped_ = 0;
  std::int64_t growths_ = 0;
};

}  // namespace tessera
