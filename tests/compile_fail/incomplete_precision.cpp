// expect: the precision policy lacks a member PrecisionPolicy needs
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>

// A user's precision policy without compute_dtype / optim_state_dtype / loss_scaling.
struct HalfIsh {
  using axis = tessera::axis::precision;
  static constexpr const char* name = "half-ish";
  static constexpr c10::ScalarType param_dtype = c10::ScalarType::Half;
};
using Bad = tessera::Experiment<tessera::models::Llama, HalfIsh>;
Bad::precision* instantiate = nullptr;
