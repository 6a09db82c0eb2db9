#pragma once
// defines: tessera::CheckpointEveryNth<N>, tessera::CheckpointEveryBlock.
// Blocks 0, N, 2N, ... (the family's repeated blocks of the types checkpoint_blocks names, by default all,
// counted in call order) are checkpointed: they keep only
// their inputs in forward and run forward again inside backward. N = 1 checkpoints every block (the seeds'
// act_ckpt=True); larger N trades memory back for speed.
#include <array>
#include <cstddef>
#include <string_view>

#include "tessera/core/axis.hpp"

namespace tessera {
namespace detail {

// "every 3rd block (blocks 0, 3, 6, ...)" for N = 3, built at compile time; "every block" for N = 1.
template <std::size_t N>
struct every_nth_name {
  static constexpr std::array<char, 96> make() {
    std::array<char, 96> out{};
    std::size_t n = 0;
    auto put = [&](std::string_view s) {
      for (char c : s) out[n++] = c;
    };
    auto put_number = [&](std::size_t v) {
      char digits[24]{};
      std::size_t k = 0;
      do {
        digits[k++] = static_cast<char>('0' + v % 10);
        v /= 10;
      } while (v);
      while (k) out[n++] = digits[--k];
    };
    if (N == 1) {
      put("every block");
      return out;
    }
    put("every ");
    put_number(N);
    const bool teen = N % 100 >= 11 && N % 100 <= 13;
    put(teen ? "th" : N % 10 == 1 ? "st" : N % 10 == 2 ? "nd" : N % 10 == 3 ? "rd" : "th");
    put(" block (blocks 0, ");
    put_number(N);
    put(", ");
    put_number(2 * N);
    put(", ...)");
    return out;
  }
  static constexpr std::array<char, 96> text = make();
  static constexpr std::string_view view() { return std::string_view(text.data()); }
};

}  // namespace detail

template <std::size_t N>
struct CheckpointEveryNth {
  static_assert(N >= 1, "CheckpointEveryNth<N>: N must be at least 1 (N = 1 checkpoints every block).");
  using axis = axis::checkpointing;
  static constexpr std::size_t every = N;
  static constexpr std::string_view name = detail::every_nth_name<N>::view();
  static constexpr bool checkpointed(std::size_t block) { return block % N == 0; }
};

using CheckpointEveryBlock = CheckpointEveryNth<1>;

}  // namespace tessera
