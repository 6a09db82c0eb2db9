// cpu_adamw_step: the fused AdamW update, one pass over p, g, m, v (and the cast copy of p), in one kernel per
// instruction set (AVX-512, AVX2+FMA+F16C, portable scalar) picked at run time, split over torch's intra-op threads
// by TensorIterator::for_each.
#include "tessera/optim/cpu_adamw.hpp"

#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define TESSERA_X86_KERNELS 1
#endif

#include "tessera/core/error.hpp"

// sqrtf is declared const here (it may not set errno: v >= 0), so that GCC vectorizes the portable kernel's square
// root without -fno-math-errno.
extern "C" float sqrtf(float) noexcept __attribute__((const));

namespace tessera::optim {
namespace {

enum class Kind { none, f32, bf16, f16 };

Kind kind_of(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return Kind::f32;
    case at::kBFloat16: return Kind::bf16;
    case at::kHalf: return Kind::f16;
    default: return Kind::none;
  }
}

template <Kind K>
using storage_t = std::conditional_t<K == Kind::f32, float, std::uint16_t>;

// Every coefficient rounded to float once, as torch's float kernels round their Scalar arguments.
struct Coeffs {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, neg_step_size, grad_scale;
  float bias_correction2_sqrt;      // torch_ops: sqrt(v) / this
  float inv_bias_correction2_sqrt;  // fused: sqrt(v) * this
};

// One contiguous run of n elements: p, m, v (fp32), g (grad's dtype), out (param_out's dtype, or null).
using RunFn = void (*)(float* p, float* m, float* v, const void* g, void* out, std::int64_t n, const Coeffs& c);

// The kernels: each written with explicit operations, none left to the compiler to fuse. Contraction is off
// (GCC would otherwise fuse a*b + c into an FMA where the target has one, intrinsics included), so that torch_ops
// rounds as torch's separate ops on every instruction set, and `fused` has its FMAs exactly where written.
#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

// The portable kernel, also the vector kernels' tail. The conversions are c10's (BFloat16.h, Half.h), bit for bit,
// written to vectorize (SSE2 at the baseline; `fused` calls fmaf where the target has no FMA).
namespace scalar {

// c10::BFloat16 / c10::Half -> float (exact).
template <Kind K>
inline float load(storage_t<K> x) {
  if constexpr (K == Kind::f32) {
    return x;
  } else if constexpr (K == Kind::bf16) {
    return __builtin_bit_cast(float, static_cast<std::uint32_t>(x) << 16);
  } else {  // c10::detail::fp16_ieee_to_fp32_value
    const std::uint32_t w = static_cast<std::uint32_t>(x) << 16;
    const std::uint32_t sign = w & 0x80000000u;
    const std::uint32_t two_w = w + w;
    const float normalized = __builtin_bit_cast(float, (two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = __builtin_bit_cast(float, (two_w >> 17) | (126u << 23)) - 0.5f;
    return __builtin_bit_cast(float, sign | (two_w < (1u << 27) ? __builtin_bit_cast(std::uint32_t, denormalized)
                                                                : __builtin_bit_cast(std::uint32_t, normalized)));
  }
}

// float -> c10::BFloat16 / c10::Half (round to nearest even, as their constructors).
template <Kind K>
inline storage_t<K> store(float f) {
  if constexpr (K == Kind::f32) {
    return f;
  } else if constexpr (K == Kind::bf16) {  // c10::detail::round_to_nearest_even
    const std::uint32_t u = __builtin_bit_cast(std::uint32_t, f);
    const std::uint32_t rounded = (u + ((u >> 16) & 1u) + 0x7FFFu) >> 16;
    return static_cast<std::uint16_t>(f != f ? 0x7FC0u : rounded);
  } else {  // c10::detail::fp16_ieee_from_fp32_value
    const std::uint32_t w = __builtin_bit_cast(std::uint32_t, f);
    float base = (__builtin_fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const std::uint32_t shl1_w = w + w;
    const std::uint32_t sign = w & 0x80000000u;
    std::uint32_t bias = shl1_w & 0xFF000000u;
    bias = bias < 0x71000000u ? 0x71000000u : bias;
    base = __builtin_bit_cast(float, (bias >> 1) + 0x07800000u) + base;
    const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, base);
    const std::uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return static_cast<std::uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
  }
}

template <CpuAdamWOrder R, Kind G, Kind O>
void run(float* __restrict p, float* __restrict m, float* __restrict v, const void* g_, void* out_, std::int64_t n,
         const Coeffs& c) {
  const auto* __restrict g = static_cast<const storage_t<G>*>(g_);
  auto* __restrict out = static_cast<storage_t<O>*>(out_);
  const float decay = c.decay, b1 = c.beta1, a1 = c.one_minus_beta1, b2 = c.beta2, a2 = c.one_minus_beta2;
  const float eps = c.eps, neg_step = c.neg_step_size, gs = c.grad_scale;
  const float bc2 = c.bias_correction2_sqrt, inv_bc2 = c.inv_bias_correction2_sqrt;
#pragma GCC ivdep
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = load<G>(g[i]) * gs;
    float mi, vi, pi;
    if constexpr (R == CpuAdamWOrder::torch_ops) {
      mi = m[i] * b1 + a1 * gi;
      vi = v[i] * b2 + a2 * gi * gi;
      pi = p[i] * decay + neg_step * mi / (sqrtf(vi) / bc2 + eps);
    } else {
      mi = __builtin_fmaf(m[i], b1, a1 * gi);
      vi = __builtin_fmaf(v[i], b2, a2 * gi * gi);
      pi = __builtin_fmaf(p[i], decay, neg_step * (mi / __builtin_fmaf(sqrtf(vi), inv_bc2, eps)));
    }
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    if constexpr (O != Kind::none) out[i] = store<O>(pi);
  }
}

}  // namespace scalar

#if TESSERA_X86_KERNELS
// The vector kernels: the same operations as scalar::run, lane by lane (IEEE add, mul, div, sqrt and FMA round the
// same in every lane width); the remainder goes to scalar::run. The fp16 conversions are F16C's (round to nearest
// even, as c10 and Tensor::to; NaN payloads aside). Each step loads a block of vectors of every stream before it
// computes (AVX-512: 8 vectors, 512 bytes of each fp32 stream; AVX2: 4, with its 16 registers): on the AMD EPYC
// (Zen 5) this was measured on, 2 threads at ~110 GB/s, that keeps more misses in flight per core and is ~5% faster
// than one vector a step, which loses to DeepSpeed's 8-vector blocks. No prefetch or streaming stores: the hardware
// prefetchers keep the pass at memory bandwidth, and p, m, v are read again next step.
// GCC 12's AVX-512 intrinsics start from a self-initialized _mm512_undefined_*, which -Wmaybe-uninitialized reports
// wherever they are inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace avx512 {

constexpr std::int64_t W = 16, block = 8;

struct Consts {
  __m512 decay, b1, a1, b2, a2, eps, neg_step, gs, bc2, inv_bc2;
};

template <Kind G>
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 load_grad(const storage_t<G>* g) {
  if constexpr (G == Kind::f32) {
    return _mm512_loadu_ps(g);
  } else if constexpr (G == Kind::bf16) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)));
  }
}

template <Kind O>
[[gnu::target("avx512f"), gnu::always_inline]] inline void store_out(storage_t<O>* out, __m512 x) {
  if constexpr (O == Kind::f32) {
    _mm512_storeu_ps(out, x);
  } else if constexpr (O == Kind::bf16) {  // scalar::store<bf16>, lane by lane
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i biased = _mm512_add_epi32(_mm512_add_epi32(u, lsb), _mm512_set1_epi32(0x7FFF));
    const __m512i rounded = _mm512_srli_epi32(biased, 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512i bits = _mm512_mask_blend_epi32(nan, rounded, _mm512_set1_epi32(0x7FC0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(bits));
  } else if constexpr (O == Kind::f16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
}

// U vectors of elements [i, i + U*W): all loads, then the updates, then all stores.
template <CpuAdamWOrder R, Kind G, Kind O, int U>
[[gnu::target("avx512f"), gnu::always_inline]] inline void update(float* p, float* m, float* v,
                                                                   const storage_t<G>* g, storage_t<O>* out,
                                                                   std::int64_t i, const Consts& k) {
  __m512 gv[U], mv[U], vv[U], pv[U];
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) {
    gv[u] = load_grad<G>(g + i + u * W);
    mv[u] = _mm512_loadu_ps(m + i + u * W);
    vv[u] = _mm512_loadu_ps(v + i + u * W);
    pv[u] = _mm512_loadu_ps(p + i + u * W);
  }
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) {
    const __m512 gi = _mm512_mul_ps(gv[u], k.gs);
    if constexpr (R == CpuAdamWOrder::torch_ops) {
      mv[u] = _mm512_add_ps(_mm512_mul_ps(mv[u], k.b1), _mm512_mul_ps(k.a1, gi));
      vv[u] = _mm512_add_ps(_mm512_mul_ps(vv[u], k.b2), _mm512_mul_ps(_mm512_mul_ps(k.a2, gi), gi));
      const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vv[u]), k.bc2), k.eps);
      pv[u] = _mm512_add_ps(_mm512_mul_ps(pv[u], k.decay), _mm512_div_ps(_mm512_mul_ps(k.neg_step, mv[u]), denom));
    } else {
      mv[u] = _mm512_fmadd_ps(mv[u], k.b1, _mm512_mul_ps(k.a1, gi));
      vv[u] = _mm512_fmadd_ps(vv[u], k.b2, _mm512_mul_ps(_mm512_mul_ps(k.a2, gi), gi));
      const __m512 denom = _mm512_fmadd_ps(_mm512_sqrt_ps(vv[u]), k.inv_bc2, k.eps);
      pv[u] = _mm512_fmadd_ps(pv[u], k.decay, _mm512_mul_ps(k.neg_step, _mm512_div_ps(mv[u], denom)));
    }
  }
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) {
    _mm512_storeu_ps(m + i + u * W, mv[u]);
    _mm512_storeu_ps(v + i + u * W, vv[u]);
    _mm512_storeu_ps(p + i + u * W, pv[u]);
    if constexpr (O != Kind::none) store_out<O>(out + i + u * W, pv[u]);
  }
}

template <CpuAdamWOrder R, Kind G, Kind O>
[[gnu::target("avx512f")]] void run(float* p, float* m, float* v, const void* g_, void* out_, std::int64_t n,
                                    const Coeffs& c) {
  const auto* g = static_cast<const storage_t<G>*>(g_);
  auto* out = static_cast<storage_t<O>*>(out_);
  const Consts k{_mm512_set1_ps(c.decay), _mm512_set1_ps(c.beta1), _mm512_set1_ps(c.one_minus_beta1),
                 _mm512_set1_ps(c.beta2), _mm512_set1_ps(c.one_minus_beta2), _mm512_set1_ps(c.eps),
                 _mm512_set1_ps(c.neg_step_size), _mm512_set1_ps(c.grad_scale),
                 _mm512_set1_ps(c.bias_correction2_sqrt), _mm512_set1_ps(c.inv_bias_correction2_sqrt)};
  std::int64_t i = 0;
  for (; i + block * W <= n; i += block * W) update<R, G, O, block>(p, m, v, g, out, i, k);
  for (; i + W <= n; i += W) update<R, G, O, 1>(p, m, v, g, out, i, k);
  if (i < n) scalar::run<R, G, O>(p + i, m + i, v + i, g + i, O == Kind::none ? nullptr : out + i, n - i, c);
}

}  // namespace avx512
#pragma GCC diagnostic pop

namespace avx2 {

constexpr std::int64_t W = 8, block = 4;

struct Consts {
  __m256 decay, b1, a1, b2, a2, eps, neg_step, gs, bc2, inv_bc2;
};

template <Kind G>
[[gnu::target("avx2,fma,f16c"), gnu::always_inline]] inline __m256 load_grad(const storage_t<G>* g) {
  if constexpr (G == Kind::f32) {
    return _mm256_loadu_ps(g);
  } else if constexpr (G == Kind::bf16) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g)));
  }
}

template <Kind O>
[[gnu::target("avx2,fma,f16c"), gnu::always_inline]] inline void store_out(storage_t<O>* out, __m256 x) {
  if constexpr (O == Kind::f32) {
    _mm256_storeu_ps(out, x);
  } else if constexpr (O == Kind::bf16) {  // scalar::store<bf16>, lane by lane
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(u, lsb), _mm256_set1_epi32(0x7FFF));
    const __m256i rounded = _mm256_srli_epi32(biased, 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m256i bits = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), nan);
    // Every lane is below 0x10000, so the saturating pack is a plain narrowing.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), packed);
  } else if constexpr (O == Kind::f16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
}

// U vectors of elements [i, i + U*W): all loads, then the updates, then all stores.
template <CpuAdamWOrder R, Kind G, Kind O, int U>
[[gnu::target("avx2,fma,f16c"), gnu::always_inline]] inline void update(float* p, float* m, float* v,
                                                                         const storage_t<G>* g, storage_t<O>* out,
                                                                         std::int64_t i, const Consts& k) {
  __m256 gv[U], mv[U], vv[U], pv[U];
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) {
    gv[u] = load_grad<G>(g + i + u * W);
    mv[u] = _mm256_loadu_ps(m + i + u * W);
    vv[u] = _mm256_loadu_ps(v + i + u * W);
    pv[u] = _mm256_loadu_ps(p + i + u * W);
  }
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) {
    const __m256 gi = _mm256_mul_ps(gv[u], k.gs);
    if constexpr (R == CpuAdamWOrder::torch_ops) {
      mv[u] = _mm256_add_ps(_mm256_mul_ps(mv[u], k.b1), _mm256_mul_ps(k.a1, gi));
      vv[u] = _mm256_add_ps(_mm256_mul_ps(vv[u], k.b2), _mm256_mul_ps(_mm256_mul_ps(k.a2, gi), gi));
      const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv[u]), k.bc2), k.eps);
      pv[u] = _mm256_add_ps(_mm256_mul_ps(pv[u], k.decay), _mm256_div_ps(_mm256_mul_ps(k.neg_step, mv[u]), denom));
    } else {
      mv[u] = _mm256_fmadd_ps(mv[u], k.b1, _mm256_mul_ps(k.a1, gi));
      vv[u] = _mm256_fmadd_ps(vv[u], k.b2, _mm256_mul_ps(_mm256_mul_ps(k.a2, gi), gi));
      const __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(vv[u]), k.inv_bc2, k.eps);
      pv[u] = _mm256_fmadd_ps(pv[u], k.decay, _mm256_mul_ps(k.neg_step, _mm256_div_ps(mv[u], denom)));
    }
  }
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u) {
    _mm256_storeu_ps(m + i + u * W, mv[u]);
    _mm256_storeu_ps(v + i + u * W, vv[u]);
    _mm256_storeu_ps(p + i + u * W, pv[u]);
    if constexpr (O != Kind::none) store_out<O>(out + i + u * W, pv[u]);
  }
}

template <CpuAdamWOrder R, Kind G, Kind O>
[[gnu::target("avx2,fma,f16c")]] void run(float* p, float* m, float* v, const void* g_, void* out_, std::int64_t n,
                                          const Coeffs& c) {
  const auto* g = static_cast<const storage_t<G>*>(g_);
  auto* out = static_cast<storage_t<O>*>(out_);
  const Consts k{_mm256_set1_ps(c.decay), _mm256_set1_ps(c.beta1), _mm256_set1_ps(c.one_minus_beta1),
                 _mm256_set1_ps(c.beta2), _mm256_set1_ps(c.one_minus_beta2), _mm256_set1_ps(c.eps),
                 _mm256_set1_ps(c.neg_step_size), _mm256_set1_ps(c.grad_scale),
                 _mm256_set1_ps(c.bias_correction2_sqrt), _mm256_set1_ps(c.inv_bias_correction2_sqrt)};
  std::int64_t i = 0;
  for (; i + block * W <= n; i += block * W) update<R, G, O, block>(p, m, v, g, out, i, k);
  for (; i + W <= n; i += W) update<R, G, O, 1>(p, m, v, g, out, i, k);
  if (i < n) scalar::run<R, G, O>(p + i, m + i, v + i, g + i, O == Kind::none ? nullptr : out + i, n - i, c);
}

}  // namespace avx2
#endif  // TESSERA_X86_KERNELS

#if !defined(__clang__)
#pragma GCC pop_options
#endif

// Kernel<R, G, O>::run of one instruction set, for the dtypes of grad and param_out.
template <template <CpuAdamWOrder, Kind, Kind> class Kernel>
RunFn pick(CpuAdamWOrder order, Kind grad, Kind out) {
  auto by_out = [&]<CpuAdamWOrder R, Kind G>() -> RunFn {
    switch (out) {
      case Kind::none: return Kernel<R, G, Kind::none>::run;
      case Kind::f32: return Kernel<R, G, Kind::f32>::run;
      case Kind::bf16: return Kernel<R, G, Kind::bf16>::run;
      case Kind::f16: return Kernel<R, G, Kind::f16>::run;
    }
    return nullptr;
  };
  auto by_grad = [&]<CpuAdamWOrder R>() -> RunFn {
    switch (grad) {
      case Kind::f32: return by_out.template operator()<R, Kind::f32>();
      case Kind::bf16: return by_out.template operator()<R, Kind::bf16>();
      case Kind::f16: return by_out.template operator()<R, Kind::f16>();
      case Kind::none: return nullptr;
    }
    return nullptr;
  };
  return order == CpuAdamWOrder::fused ? by_grad.template operator()<CpuAdamWOrder::fused>()
                                       : by_grad.template operator()<CpuAdamWOrder::torch_ops>();
}

template <CpuAdamWOrder R, Kind G, Kind O>
struct ScalarKernel {
  static constexpr RunFn run = scalar::run<R, G, O>;
};
#if TESSERA_X86_KERNELS
template <CpuAdamWOrder R, Kind G, Kind O>
struct Avx512Kernel {
  static constexpr RunFn run = avx512::run<R, G, O>;
};
template <CpuAdamWOrder R, Kind G, Kind O>
struct Avx2Kernel {
  static constexpr RunFn run = avx2::run<R, G, O>;
};
#endif

// Instruction sets, widest first.
enum class Isa { avx512, avx2, scalar };
constexpr std::pair<Isa, std::string_view> isa_names[] = {
    {Isa::avx512, "avx512"}, {Isa::avx2, "avx2"}, {Isa::scalar, "scalar"}};

std::string_view name_of(Isa isa) {
  for (const auto& [i, name] : isa_names)
    if (i == isa) return name;
  return "?";
}

// Whether this CPU and its OS (AVX state saved by the kernel: __builtin_cpu_supports checks XCR0) run `isa`.
bool cpu_has(Isa isa) {
#if TESSERA_X86_KERNELS
  __builtin_cpu_init();
  switch (isa) {
    case Isa::avx512: return __builtin_cpu_supports("avx512f");
    case Isa::avx2: {
      unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // F16C: CPUID leaf 1, ECX bit 29 (no cpu_supports name in clang)
      const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    }
    case Isa::scalar: return true;
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

Isa widest_isa() {
  static const Isa widest = [] {
    for (const auto& [isa, name] : isa_names)
      if (cpu_has(isa)) return isa;
    return Isa::scalar;
  }();
  return widest;
}

// "avx2, scalar": the sets this CPU runs, widest first.
std::string supported_names() {
  std::string names;
  for (const auto& [isa, name] : isa_names)
    if (cpu_has(isa)) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

Isa active_isa() {
  const char* forced = std::getenv("TESSERA_CPU_ISA");
  if (forced == nullptr || *forced == '\0') return widest_isa();
  for (const auto& [isa, name] : isa_names) {
    if (name != forced) continue;
    if (!cpu_has(isa))
      throw Error("TESSERA_CPU_ISA=" + std::string(forced) + ": this CPU lacks that instruction set; it runs " +
                  supported_names() + " (unset TESSERA_CPU_ISA for the widest)");
    return isa;
  }
  throw Error("TESSERA_CPU_ISA=" + std::string(forced) +
              " is no instruction set of cpu_adamw_step; use avx512, avx2 or scalar (this CPU runs " +
              supported_names() + "), or unset it for the widest");
}

RunFn pick_kernel(Isa isa, CpuAdamWOrder order, Kind grad, Kind out) {
  switch (isa) {
#if TESSERA_X86_KERNELS
    case Isa::avx512: return pick<Avx512Kernel>(order, grad, out);
    case Isa::avx2: return pick<Avx2Kernel>(order, grad, out);
#endif
    default: return pick<ScalarKernel>(order, grad, out);
  }
}

// "(Float, cpu, 4096 elements)": what a refused tensor is.
std::string describe(const at::Tensor& t) {
  return std::string("(") + c10::toString(t.scalar_type()) + ", " + t.device().str() + ", " +
         std::to_string(t.numel()) + " elements" + (t.is_contiguous() ? ")" : ", not contiguous)");
}

void check_tensor(const at::Tensor& t, const char* name, std::int64_t n, bool fp32_only) {
  const std::string what = std::string("cpu_adamw_step: ") + name;
  if (!t.defined())
    throw Error(what + " is an undefined tensor; pass a CPU tensor of " + std::to_string(n) + " elements");
  if (!t.device().is_cpu())
    throw Error(what + " " + describe(t) + " must live on the CPU; move it with .cpu()");
  const Kind k = kind_of(t.scalar_type());
  if (fp32_only ? k != Kind::f32 : k == Kind::none)
    throw Error(what + " " + describe(t) + " must be " + (fp32_only ? "float32" : "float32, bfloat16 or float16") +
                "; convert it with .to(at::kFloat)");
  if (!t.is_contiguous()) throw Error(what + " " + describe(t) + " must be contiguous; pass .contiguous()");
  if (t.numel() != n)
    throw Error(what + " has " + std::to_string(t.numel()) + " elements but param has " + std::to_string(n) +
                "; every tensor of one update must have param's element count");
}

void check_disjoint(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  if (a.numel() > 0 && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes())
    throw Error(std::string("cpu_adamw_step: ") + a_name + " and " + b_name +
                " share memory; each must be its own buffer (pass a .clone())");
}

}  // namespace

std::string_view cpu_adamw_isa() { return name_of(active_isa()); }

std::string_view cpu_adamw_widest_isa() { return name_of(widest_isa()); }

void cpu_adamw_step(at::Tensor& param, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, const at::Tensor& grad,
                    const CpuAdamWHyper& hyper, at::Tensor* param_out) {
  if (!param.defined()) throw Error("cpu_adamw_step: param is an undefined tensor; pass a float32 CPU tensor");
  const std::int64_t n = param.numel();
  check_tensor(param, "param", n, true);
  check_tensor(exp_avg, "exp_avg", n, true);
  check_tensor(exp_avg_sq, "exp_avg_sq", n, true);
  check_tensor(grad, "grad", n, false);
  if (param_out) check_tensor(*param_out, "param_out", n, false);
  if (hyper.step < 1)
    throw Error("cpu_adamw_step: hyper.step is " + std::to_string(hyper.step) +
                "; it is the 1-based count of steps including this one, so at least 1");
  if (hyper.order != CpuAdamWOrder::torch_ops && hyper.order != CpuAdamWOrder::fused)
    throw Error("cpu_adamw_step: hyper.order is " + std::to_string(static_cast<int>(hyper.order)) +
                "; use CpuAdamWOrder::torch_ops or CpuAdamWOrder::fused");
  check_disjoint(param, "param", exp_avg, "exp_avg");
  check_disjoint(param, "param", exp_avg_sq, "exp_avg_sq");
  check_disjoint(exp_avg, "exp_avg", exp_avg_sq, "exp_avg_sq");
  for (const auto& [t, name] : {std::pair{&param, "param"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"}})
    check_disjoint(*t, name, grad, "grad");
  if (param_out)
    for (const auto& [t, name] : {std::pair{&param, "param"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"}})
      check_disjoint(*t, name, *param_out, "param_out");
  const RunFn run = pick_kernel(active_isa(), hyper.order, kind_of(grad.scalar_type()),
                                param_out ? kind_of(param_out->scalar_type()) : Kind::none);
  if (n == 0) return;

  const double t = static_cast<double>(hyper.step);
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, t);
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(hyper.beta2, t));
  const Coeffs c{.decay = static_cast<float>(1.0 - hyper.lr * hyper.weight_decay),
                 .beta1 = static_cast<float>(hyper.beta1),
                 .one_minus_beta1 = static_cast<float>(1.0 - hyper.beta1),
                 .beta2 = static_cast<float>(hyper.beta2),
                 .one_minus_beta2 = static_cast<float>(1.0 - hyper.beta2),
                 .eps = static_cast<float>(hyper.eps),
                 .neg_step_size = static_cast<float>(-hyper.lr / bias_correction1),
                 .grad_scale = static_cast<float>(hyper.grad_scale),
                 .bias_correction2_sqrt = static_cast<float>(bias_correction2_sqrt),
                 .inv_bias_correction2_sqrt = static_cast<float>(1.0 / bias_correction2_sqrt)};

  // Flat views, so that shapes need not agree. Threads: TensorIterator::for_each, compiled inside LibTorch, splits
  // [0, n) over its intra-op threads; at::parallel_for would not, being a header template that runs serially in a
  // file compiled without -fopenmp (LibTorch's OpenMP backend), as tessera's are.
  at::NoGradGuard no_grad;
  const at::Tensor p = param.view({n}), m = exp_avg.view({n}), v = exp_avg_sq.view({n}), g = grad.view({n});
  const at::Tensor o = param_out ? param_out->view({n}) : at::Tensor();
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false).check_all_same_dtype(false).resize_outputs(false);
  config.add_output(p).add_output(m).add_output(v);
  if (param_out) config.add_output(o);
  config.add_input(g);
  at::TensorIterator iter = config.build();
  const int ntensors = iter.ntensors();  // p, m, v[, out], g
  iter.for_each([&](char** data, const std::int64_t* strides, std::int64_t size0, std::int64_t size1) {
    for (std::int64_t j = 0; j < size1; ++j) {  // size1 is 1 for these 1-D operands
      auto row = [&](int k) { return data[k] + j * strides[ntensors + k]; };
      run(reinterpret_cast<float*>(row(0)), reinterpret_cast<float*>(row(1)), reinterpret_cast<float*>(row(2)),
          row(ntensors - 1), param_out ? row(3) : nullptr, size0, c);
    }
  });
}

}  // namespace tessera::optim
