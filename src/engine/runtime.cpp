#include "tessera/engine/runtime.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <string>
#include <thread>

#include "tessera/core/error.hpp"
#include "tessera/memory/counting_cpu_allocator.hpp"

namespace tessera {

Runtime make_runtime(const RunConfig& cfg, const JobPlace& place) {
  memory::install_counting_cpu_allocator();
  Runtime rt;
  rt.rank = place.rank;
  rt.world_size = place.size;
  const bool want_cuda = cfg.device.rfind("cuda", 0) == 0;
  if (want_cuda || cfg.device == "auto") {
    if (at::hasCUDA()) {
      const auto gpus = static_cast<int>(std::max<std::size_t>(1, at::getNumGPUs()));
      rt.device = want_cuda && cfg.device.size() > 4 ? c10::Device(cfg.device)
                                                     : c10::Device(c10::DeviceType::CUDA,
                                                                   static_cast<c10::DeviceIndex>(place.local_rank % gpus));
    } else if (want_cuda) {
      throw ConfigError("device=" + cfg.device +
                        ": no CUDA device is usable here (no GPU visible, or LibTorch built without CUDA); use "
                        "device=cpu or device=auto");
    }
  }
  const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  if (cfg.threads > cores)
    throw ConfigError("threads=" + std::to_string(cfg.threads) + ": this machine runs " + std::to_string(cores) +
                      " hardware threads; use at most " + std::to_string(cores) +
                      " (0 = the node's cores shared among its ranks)");
  rt.threads = cfg.threads > 0 ? cfg.threads : std::max<std::int64_t>(1, cores / std::max(1, place.local_size));
  at::set_num_threads(static_cast<int>(rt.threads));
  return rt;
}

data::TokenSource open_tokens(const RunConfig& cfg, std::int64_t vocab_size) {
  if (cfg.data.empty()) {
    const std::int64_t rows = cfg.num_train_samples > 0 ? cfg.num_train_samples : 512;
    return data::TokenSource::synthetic(static_cast<std::size_t>(rows * cfg.seq_len + 1),
                                        static_cast<std::uint32_t>(vocab_size), static_cast<std::uint64_t>(cfg.seed));
  }
  data::TokenSource tokens = data::TokenSource::open(cfg.data);
  if (tokens.max_token() >= vocab_size)
    throw ConfigError("data=" + cfg.data + ": holds token id " + std::to_string(tokens.max_token()) +
                      " but the model's vocab_size is " + std::to_string(vocab_size) +
                      "; tokenize with the model's own tokenizer");
  return tokens;
}

namespace detail {

c10::ScalarType reduce_dtype_of(const std::string& name) {
  if (name == "fp32") return c10::ScalarType::Float;
  if (name == "bf16") return c10::ScalarType::BFloat16;
  if (name == "fp16") return c10::ScalarType::Half;
  throw ConfigError("reduce_dtype=" + name + ": must be fp32, bf16 or fp16");
}

}  // namespace detail

}  // namespace tessera
