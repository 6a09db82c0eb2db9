// kernel_target and the dry run's target (engine/target.hpp).
#include "tessera/engine/target.hpp"

#include <ATen/core/Tensor.h>

namespace tessera {
namespace {

std::optional<c10::DeviceType>& target_ref() {
  static std::optional<c10::DeviceType> target;
  return target;
}

}  // namespace

std::optional<c10::DeviceType> dry_run_target() { return target_ref(); }

void detail::set_dry_run_target(std::optional<c10::DeviceType> target) { target_ref() = target; }

c10::DeviceType kernel_target(const at::Tensor& t) {
  if (t.is_meta())
    if (const auto target = target_ref()) return *target;
  return t.device().type();
}

}  // namespace tessera
