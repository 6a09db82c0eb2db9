// tessera_adam8bit_dump: steps tessera's Adam8bit on tensors with given gradients and writes the parameters
// and the state, so that tests/reference/check_adam8bit_against_bnb.py can compare them with
// bitsandbytes.optim.Adam8bit.
//   tessera_adam8bit_dump IN.safetensors OUT.safetensors LR WEIGHT_DECAY
// IN holds, per tensor NAME, NAME.param (any shape; F32, BF16 or F16: the dtype the update writes back in) and
// NAME.grads (steps, NAME.param's shape...). Each NAME is its own buffer (one segment, tensor_numel = its numel,
// so min_8bit_size applies per tensor as in bitsandbytes) and takes steps Adam8bit::step calls. OUT holds
//   NAME.param                     the parameters after the steps, in their dtype
//   NAME.m_codes, NAME.v_codes     U8, and NAME.m_absmax, NAME.v_absmax F32 (one per 256-block)  when 8-bit
//   NAME.m32, NAME.v32             F32                                                          when fp32 state
// Exit 1 with the message on any error.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "dump_tensors.hpp"
#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/io/safetensors.hpp"
#include "tessera/optim/adam8bit.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s IN.safetensors OUT.safetensors LR WEIGHT_DECAY\n", argv[0]);
    return 2;
  }
  try {
    const auto in = tessera::io::SafetensorsFile::open(argv[1]);
    const tessera::StepHyper hyper{std::stod(argv[3]), std::stod(argv[4])};
    const std::string suffix = ".param";
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& info : in.tensors()) {
      if (info.name.size() <= suffix.size() || !info.name.ends_with(suffix)) continue;
      const std::string name = info.name.substr(0, info.name.size() - suffix.size());
      const tessera::io::TensorInfo* grads_info = in.find(name + ".grads");
      if (grads_info == nullptr) throw std::runtime_error(name + ".param has no " + name + ".grads");
      const at::Tensor param = tessera::tensor_from_bytes(info, in.bytes(info));
      const at::Tensor grads = tessera::tensor_from_bytes(*grads_info, in.bytes(*grads_info));
      at::Tensor flat = param.reshape({-1}).clone();
      const tessera::ParamSegment whole{0, flat.numel(), flat.numel()};
      tessera::Adam8bit::State state =
          tessera::Adam8bit::init(flat, at::kFloat, std::span<const tessera::ParamSegment>(&whole, 1));
      for (std::int64_t s = 0; s < grads.size(0); ++s)
        tessera::Adam8bit::step(state, flat, grads[s].reshape({-1}).contiguous(), hyper);
      out.emplace_back(name + ".param", flat.reshape(param.sizes()));
      if (state.m_codes.defined()) {
        out.emplace_back(name + ".m_codes", state.m_codes);
        out.emplace_back(name + ".v_codes", state.v_codes);
        out.emplace_back(name + ".m_absmax", state.m_absmax);
        out.emplace_back(name + ".v_absmax", state.v_absmax);
      } else {
        out.emplace_back(name + ".m32", state.m32);
        out.emplace_back(name + ".v32", state.v32);
      }
    }
    tessera::testing::write_named_tensors(argv[2], out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_adam8bit_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
