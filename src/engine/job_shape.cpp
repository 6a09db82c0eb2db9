// implements: reduce_dtype_of (engine/job_shape.hpp).
#include "tessera/engine/job_shape.hpp"

namespace tessera {

c10::ScalarType reduce_dtype_of(ReduceDtype dtype) {
  switch (dtype) {
    case ReduceDtype::auto_:
    case ReduceDtype::param: return c10::ScalarType::Undefined;
    case ReduceDtype::fp32: return c10::ScalarType::Float;
    case ReduceDtype::bf16: return c10::ScalarType::BFloat16;
    case ReduceDtype::fp16: return c10::ScalarType::Half;
  }
  throw Error("reduce_dtype: no such dtype");
}

}  // namespace tessera
