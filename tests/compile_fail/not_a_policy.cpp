// expect: this argument is not a tessera policy
#include <tessera/experiment.hpp>
#include <tessera/models/llama.hpp>

struct Adam {};  // a user's type that forgot `using axis = tessera::axis::optimizer;`
using Bad = tessera::Experiment<tessera::models::Llama, Adam>;
Bad::optimizer* instantiate = nullptr;
