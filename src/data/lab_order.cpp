// implements: the Python labs' row orders (data/lab_order.hpp). The numpy half is written from numpy 2.3.5's
// numpy/random/bit_generator.pyx (SeedSequence), src/pcg64/pcg64.{h,c} (PCG64), _generator.pyx (shuffle) and
// src/distributions/distributions.c (random_interval); the torch half calls LibTorch's own generator and randperm.
#include "tessera/data/lab_order.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randperm.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::data {
namespace {

__extension__ typedef unsigned __int128 u128;  // PCG64's 128-bit state; __extension__ keeps -Wpedantic quiet

// numpy's SeedSequence constants (bit_generator.pyx); every product is taken mod 2^32.
constexpr std::uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr std::uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr unsigned kXShift = 16;  // half a uint32

// SeedSequence(seed).pool (pool_size 4, no spawn key). The entropy is the seed's 32-bit words, lowest first ([0]
// for seed 0), so at most 2 words: never more than the pool, so the "remaining entropy" pass of mix_entropy is empty.
std::array<std::uint32_t, 4> seed_sequence_pool(std::uint64_t seed) {
  std::array<std::uint32_t, 2> words{};
  std::size_t count = 0;
  if (seed == 0) words[count++] = 0;
  for (std::uint64_t s = seed; s != 0; s >>= 32) words[count++] = static_cast<std::uint32_t>(s);

  std::uint32_t hash_const = kInitA;  // shared by every hashmix of the pass, as numpy's hash_const[0]
  const auto hashmix = [&hash_const](std::uint32_t value) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    return value ^ (value >> kXShift);
  };
  const auto mix = [](std::uint32_t x, std::uint32_t y) {
    const std::uint32_t r = kMixMultL * x - kMixMultR * y;
    return r ^ (r >> kXShift);
  };
  std::array<std::uint32_t, 4> pool{};
  for (std::size_t i = 0; i < pool.size(); ++i) pool[i] = hashmix(i < count ? words[i] : 0);
  for (std::size_t src = 0; src < pool.size(); ++src)
    for (std::size_t dst = 0; dst < pool.size(); ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
  return pool;
}

// PCG64 (XSL-RR 128/64) with numpy's 32-bit buffer: next32 hands out the low half of a 64-bit output, then its high
// half on the next call; next64 neither uses nor clears the buffer.
class Pcg64 {
 public:
  explicit Pcg64(std::uint64_t seed) {
    // generate_state(4, uint64): 8 uint32 words cycling over the pool, paired (low, high) into 4 uint64 words;
    // pcg64_set_seed takes initstate = (w0 << 64) | w1 and initseq = (w2 << 64) | w3.
    const auto pool = seed_sequence_pool(seed);
    std::uint32_t hash_const = kInitB;
    std::array<std::uint64_t, 4> w{};
    for (std::size_t i = 0; i < 8; ++i) {
      std::uint32_t v = pool[i % pool.size()];
      v ^= hash_const;
      hash_const *= kMultB;
      v *= hash_const;
      v ^= v >> kXShift;
      w[i / 2] |= static_cast<std::uint64_t>(v) << (32 * (i % 2));
    }
    const u128 initstate = (static_cast<u128>(w[0]) << 64) | w[1];
    const u128 initseq = (static_cast<u128>(w[2]) << 64) | w[3];
    // pcg_setseq_128_srandom_r
    inc_ = (initseq << 1) | 1;
    step();
    state_ += initstate;
    step();
  }

  std::uint64_t next64() {
    step();
    const auto high = static_cast<std::uint64_t>(state_ >> 64);
    const auto value = high ^ static_cast<std::uint64_t>(state_);
    const unsigned rot = static_cast<unsigned>(high >> 58);
    return (value >> rot) | (value << ((64 - rot) & 63));
  }

  std::uint32_t next32() {
    if (has_uint32_) {
      has_uint32_ = false;
      return uinteger_;
    }
    const std::uint64_t next = next64();
    has_uint32_ = true;
    uinteger_ = static_cast<std::uint32_t>(next >> 32);
    return static_cast<std::uint32_t>(next);
  }

 private:
  void step() {
    static constexpr u128 kMultiplier = (static_cast<u128>(2549297995355413924ULL) << 64) | 4865540595714422341ULL;
    state_ = state_ * kMultiplier + inc_;
  }

  u128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  std::uint32_t uinteger_ = 0;
};

// numpy's random_interval: a value in [0, max], drawn as (draw & smallest all-ones mask >= max) until <= max.
std::uint64_t random_interval(Pcg64& rng, std::uint64_t max) {
  if (max == 0) return 0;
  std::uint64_t mask = max;
  for (unsigned shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
  std::uint64_t value = 0;
  if (max <= 0xffffffffULL) {
    while ((value = (rng.next32() & mask)) > max) {
    }
  } else {
    while ((value = (rng.next64() & mask)) > max) {
    }
  }
  return value;
}

std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void require_rows(const char* fn, std::int64_t n) {
  if (n < 0)
    throw ConfigError(std::string(fn) + ": n=" + std::to_string(n) + " rows is negative; give the dataset's row "
                      "count (>= 0)");
}

std::vector<std::int64_t> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  const auto* p = c.data_ptr<std::int64_t>();
  return std::vector<std::int64_t>(p, p + c.numel());
}

// The rows randperm(n, generator=g) gives, as RandomSampler yields them.
std::vector<std::int64_t> randperm_rows(std::int64_t n, at::Generator& g) {
  return to_vector(at::randperm(n, g, at::TensorOptions().dtype(at::kLong)));
}

}  // namespace

std::vector<std::int64_t> numpy_permutation(std::uint64_t seed, std::int64_t n) {
  require_rows("numpy_permutation", n);
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  std::iota(out.begin(), out.end(), std::int64_t{0});
  if (n < 2) return out;  // numpy draws nothing for 0 or 1 rows
  Pcg64 rng(seed);
  for (std::int64_t i = n - 1; i >= 1; --i) {
    const auto j = static_cast<std::int64_t>(random_interval(rng, static_cast<std::uint64_t>(i)));
    std::swap(out[static_cast<std::size_t>(i)], out[static_cast<std::size_t>(j)]);
  }
  return out;
}

TrainTestSplit numpy_train_test_split(std::int64_t n, double test_size, std::uint64_t seed) {
  require_rows("numpy_train_test_split", n);
  if (!(test_size > 0.0 && test_size < 1.0))
    throw ConfigError("numpy_train_test_split: test_size=" + show(test_size) + " is outside (0, 1); give the "
                      "fraction of the rows that goes to the test split, e.g. 0.05");
  if (n == 0)
    throw ConfigError("numpy_train_test_split: n=0 rows gives two empty splits; give a dataset with rows");
  const double n_test_exact = std::ceil(test_size * static_cast<double>(n));
  const auto n_test = static_cast<std::int64_t>(n_test_exact);
  if (n_test >= n)
    throw ConfigError("numpy_train_test_split: test_size=" + show(test_size) + " of n=" + std::to_string(n) +
                      " rows leaves ceil(test_size*n) = " + std::to_string(n_test) +
                      " test rows and an empty train split; use a smaller test_size or more rows");
  auto perm = numpy_permutation(seed, n);
  TrainTestSplit split;
  split.test.assign(perm.begin(), perm.begin() + n_test);
  split.train.assign(perm.begin() + n_test, perm.end());
  return split;
}

std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed) {
  require_rows("torch_randperm", n);
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  return randperm_rows(n, g);
}

TorchShuffledEpochs::TorchShuffledEpochs(std::int64_t n, std::uint64_t seed, std::int64_t batch_size, bool drop_last)
    : n_(n), batch_size_(batch_size), drop_last_(drop_last),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  if (n < 1)
    throw ConfigError("TorchShuffledEpochs: n=" + std::to_string(n) + " rows; a shuffled DataLoader needs at least "
                      "one row (torch's RandomSampler refuses an empty dataset)");
  if (batch_size < 1)
    throw ConfigError("TorchShuffledEpochs: batch_size=" + std::to_string(batch_size) + "; use a batch_size >= 1");
}

std::vector<std::int64_t> TorchShuffledEpochs::next_epoch() {
  // _BaseDataLoaderIter.__init__: _base_seed = torch.empty((), dtype=torch.int64).random_(generator=g).
  at::empty({}, at::TensorOptions().dtype(at::kLong)).random_(generator_);
  // RandomSampler.__iter__ (num_samples = n): one randperm(n) yielded whole, then randperm(n)[:0] at the end.
  auto rows = randperm_rows(n_, generator_);
  randperm_rows(n_, generator_);
  if (drop_last_) rows.resize(static_cast<std::size_t>(n_ / batch_size_ * batch_size_));
  ++epochs_done_;
  return rows;
}

std::vector<std::int64_t> dataloader_epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch,
                                                 std::int64_t batch_size, bool drop_last) {
  if (epoch < 0)
    throw ConfigError("dataloader_epoch_order: epoch=" + std::to_string(epoch) + "; epochs count from 0");
  TorchShuffledEpochs epochs(n, seed, batch_size, drop_last);
  for (std::int64_t e = 0; e < epoch; ++e) epochs.next_epoch();
  return epochs.next_epoch();
}

std::vector<std::int64_t> distributed_sampler_indices(std::int64_t n, std::int64_t world_size, std::int64_t rank,
                                                      std::uint64_t seed, std::int64_t epoch, bool shuffle,
                                                      bool drop_last) {
  require_rows("distributed_sampler_indices", n);
  if (world_size < 1)
    throw ConfigError("distributed_sampler_indices: world_size=" + std::to_string(world_size) +
                      "; give the number of ranks (>= 1)");
  if (rank < 0 || rank >= world_size)
    throw ConfigError("distributed_sampler_indices: rank=" + std::to_string(rank) + " is outside [0, " +
                      std::to_string(world_size - 1) + "] for world_size=" + std::to_string(world_size) +
                      "; give this process's rank");
  if (epoch < 0)
    throw ConfigError("distributed_sampler_indices: epoch=" + std::to_string(epoch) + "; epochs count from 0");
  if (shuffle && static_cast<std::uint64_t>(epoch) > std::numeric_limits<std::uint64_t>::max() - seed)
    throw ConfigError("distributed_sampler_indices: seed=" + std::to_string(seed) + " plus epoch=" +
                      std::to_string(epoch) + " exceeds 2^64-1, which torch's manual_seed refuses; use a smaller "
                      "seed");
  std::vector<std::int64_t> order;
  if (shuffle) {
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<std::uint64_t>(epoch));
    order = randperm_rows(n, g);
  } else {
    order.resize(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), std::int64_t{0});
  }
  // num_samples per rank: ceil(n / W), or with drop_last (and n % W != 0) ceil((n - W) / W) = floor(n / W).
  const std::int64_t per_rank = n / world_size + (!drop_last && n % world_size != 0 ? 1 : 0);
  const std::int64_t total = per_rank * world_size;
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(per_rank));
  // Position p of the padded list is order[p mod n]: padding repeats the order from its start, as often as needed.
  for (std::int64_t p = rank; p < total; p += world_size) out.push_back(order[static_cast<std::size_t>(p % n)]);
  return out;
}

}  // namespace tessera::data
