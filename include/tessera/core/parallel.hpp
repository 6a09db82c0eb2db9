#pragma once
// defines: tessera::parallel_for, the CPU loops' thread split (Adam8bit, block-wise 8-bit and NF4 quantization).
// at::parallel_for is a header template whose threads come from OpenMP pragmas in the caller's translation unit,
// so in code built without -fopenmp against an OpenMP LibTorch (Debian's) it runs serially. This one splits
// [begin, end) into at most at::get_num_threads() contiguous chunks of at least `grain` elements and runs them
// on std::threads (the caller runs the first); fn(chunk_begin, chunk_end). An exception in any chunk is
// rethrown after all have finished.
#include <cstdint>
#include <functional>

namespace tessera {

void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace tessera
