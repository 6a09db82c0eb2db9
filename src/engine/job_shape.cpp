// implements: reduce_dtype_of (engine/job_shape.hpp).
#include "tessera/engine/job_shape.hpp"

namespace tessera {

c10::ScalarType reduce_dtype_of(const std::string& name) {
  if (name == "fp32") return c10::ScalarType::Float;
  if (name == "bf16") return c10::ScalarType::BFloat16;
  if (name == "fp16") return c10::ScalarType::Half;
  throw ConfigError("reduce_dtype=" + name + ": must be fp32, bf16 or fp16");
}

}  // namespace tessera
