// implements: any_rank (engine/optimizer_step.hpp).
#include "tessera/engine/optimizer_step.hpp"

#include <ATen/ATen.h>

namespace tessera {

bool any_rank(const UnitEngine& engine, bool flag) {
  dist::AnyCommunicator world = engine.comms().world;  // a handle: copies share the communicator
  if (world.size() == 1) return flag;
  const at::Tensor t = at::full({1}, flag ? 1.0 : 0.0, at::TensorOptions().dtype(at::kFloat).device(engine.plan().device));
  world.all_reduce(t, dist::ReduceOp::max);
  if (t.is_meta()) return flag;  // a dry run: shapes only
  return t.item<float>() > 0.5f;
}

}  // namespace tessera
