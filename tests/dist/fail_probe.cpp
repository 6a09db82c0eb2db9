// fail_probe: a Ddp experiment whose model throws in a block's forward on rank 1 during step 1, while rank 0
// goes on into backward and the gradient all-reduce that rank 1 never joins. tessera::main must print rank 1's
// error once and end the whole job non-zero within seconds (tests/dist/expect_fail_once.sh).
#include <stdexcept>

#include "tessera/engine/job.hpp"
#include "tessera/tessera.hpp"

namespace {

struct FailingLlama : tessera::models::Llama {
  static at::Tensor compute(const Config& c, const Context& ctx, std::size_t call, const tessera::models::CallWeights& w,
                            std::span<const at::Tensor> inputs) {
    static int blocks = 0;
    // tiny has 4 blocks (calls 1..4): the 6th block forward is step 1's second block.
    const bool block = call >= 1 && call <= static_cast<std::size_t>(c.num_hidden_layers);
    if (block && tessera::job::place().rank == 1 && ++blocks == 6)
      throw std::runtime_error("fail_probe: rank 1 fails in a block's forward on purpose");
    return Llama::compute(c, ctx, call, w, inputs);
  }
};

}  // namespace

int main(int argc, char** argv) { return tessera::main<tessera::Experiment<FailingLlama, tessera::Ddp>>(argc, argv); }
