// implements: tessera::parallel_for (core/parallel.hpp).
#include "tessera/core/parallel.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (end <= begin) return;
  const std::int64_t n = end - begin;
  const std::int64_t most = (n + std::max<std::int64_t>(grain, 1) - 1) / std::max<std::int64_t>(grain, 1);
  const std::int64_t chunks = std::max<std::int64_t>(1, std::min<std::int64_t>(at::get_num_threads(), most));
  if (chunks == 1) {
    fn(begin, end);
    return;
  }
  const std::int64_t size = (n + chunks - 1) / chunks;
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&](std::int64_t c) {
    const std::int64_t b = begin + c * size, e = std::min(end, b + size);
    if (b >= e) return;
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (std::int64_t c = 1; c < chunks; ++c) workers.emplace_back(run, c);
  run(0);
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tessera
