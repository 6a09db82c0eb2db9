// expect: sharding policy's levels do not nest
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>

// A user's sharding policy that shards parameters but keeps full gradients: the engine has no such mode.
struct ParamsOnly {
  using axis = tessera::axis::sharding;
  static constexpr const char* name = "params-only";
  static constexpr bool shards_parameters = true;
  static constexpr bool shards_gradients = false;
  static constexpr bool shards_optimizer = false;
  static constexpr bool data_parallel = true;
  static constexpr bool hybrid = false;
};
using Bad = tessera::Experiment<tessera::models::Llama, ParamsOnly>;
Bad::sharding* instantiate = nullptr;
