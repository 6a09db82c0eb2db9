#pragma once
// defines: DirectRunner<M>, a CallRunner that runs a family's program on plain tensors: no engine, no sharding,
// ordinary autograd. For evaluating a family on weights a caller holds, and for testing a family alone.
//   DirectRunner<models::Llama> run(config, ctx, units);   // units[u]: unit u's parameters in spec order
//   at::Tensor loss = models::Llama::forward(config, run, batch);
#include <cstddef>
#include <utility>
#include <vector>

#include "tessera/models/model_family.hpp"

namespace tessera::models {

template <class M>
class DirectRunner final : public CallRunner {
 public:
  DirectRunner(const typename M::Config& config, const typename M::Context& ctx,
               std::vector<std::vector<at::Tensor>> units, const LinearFn* adapter = nullptr)
      : config_(config), ctx_(ctx), calls_(M::calls(config)), units_(std::move(units)), adapter_(adapter) {}

  at::Tensor call(std::size_t c, std::vector<at::Tensor> inputs) override {
    CallWeights w;
    w.adapter = adapter_;
    for (std::size_t u : calls_.at(c).units) w.units.push_back(units_.at(u));
    return M::compute(config_, ctx_, c, w, inputs);
  }

 private:
  const typename M::Config& config_;
  const typename M::Context& ctx_;
  std::vector<CallInfo> calls_;
  std::vector<std::vector<at::Tensor>> units_;
  const LinearFn* adapter_;
};

}  // namespace tessera::models
