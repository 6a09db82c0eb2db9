// cpu_adamw_step: the fused AdamW update, one pass over p, g, m, v (and the cast copy of p), vectorized by GCC
// in one clone per instruction set and split over torch's intra-op threads by TensorIterator::for_each.
#include "tessera/optim/cpu_adamw.hpp"

#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "tessera/core/error.hpp"

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

// Every coefficient rounded to float once, as torch's float kernels round their Scalar arguments.
struct Coeffs {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size,
      grad_scale;
};

}  // namespace
}  // namespace tessera::optim

// The kernel. sqrtf is declared const here (it may not set errno: v >= 0), so that GCC vectorizes it without
// -fno-math-errno; the options below vectorize it at -O2 too and turn off FMA contraction, so that each operation
// rounds as torch's separate ops do, on every CPU. Nothing from a header is called in here (GCC inlines no function
// compiled with other FP options); the conversions are c10's (BFloat16.h, Half.h), bit for bit, written to vectorize.
extern "C" float sqrtf(float) noexcept __attribute__((const));

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off", "tree-vectorize", "vect-cost-model=dynamic")

namespace tessera::optim {
namespace {

template <Kind K>
using storage_t = std::conditional_t<K == Kind::f32, float, std::uint16_t>;

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

// The per-element update in torch's op order (mul_; mul_, add_; mul_, addcmul_; sqrt / bc2 + eps; addcdiv_).
template <Kind G, Kind O>
[[gnu::always_inline]] inline void update(float* __restrict p, float* __restrict m, float* __restrict v,
                                          const storage_t<G>* __restrict g, storage_t<O>* __restrict out,
                                          std::int64_t n, const Coeffs& c) {
  const float decay = c.decay, b1 = c.beta1, a1 = c.one_minus_beta1, b2 = c.beta2, a2 = c.one_minus_beta2;
  const float bc2 = c.bias_correction2_sqrt, eps = c.eps, neg_step = c.neg_step_size, gs = c.grad_scale;
#pragma GCC ivdep
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = load<G>(g[i]) * gs;
    const float mi = m[i] * b1 + a1 * gi;
    const float vi = v[i] * b2 + a2 * gi * gi;
    const float denom = sqrtf(vi) / bc2 + eps;
    const float pi = p[i] * decay + neg_step * mi / denom;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    if constexpr (O != Kind::none) out[i] = store<O>(pi);
  }
}

template <Kind G>
[[gnu::always_inline]] inline void update_out(float* p, float* m, float* v, const void* g, void* out, Kind out_kind,
                                              std::int64_t n, const Coeffs& c) {
  const auto* gt = static_cast<const storage_t<G>*>(g);
  switch (out_kind) {
    case Kind::none: return update<G, Kind::none>(p, m, v, gt, nullptr, n, c);
    case Kind::f32: return update<G, Kind::f32>(p, m, v, gt, static_cast<float*>(out), n, c);
    case Kind::bf16: return update<G, Kind::bf16>(p, m, v, gt, static_cast<std::uint16_t*>(out), n, c);
    case Kind::f16: return update<G, Kind::f16>(p, m, v, gt, static_cast<std::uint16_t*>(out), n, c);
  }
}

// One contiguous run of n elements. On x86-64, compiled once per instruction set (AVX-512, AVX2+FMA, SSE2) and the
// clone picked at load time; all round alike (no contraction).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSERA_KERNEL_CLONES
#endif
TESSERA_KERNEL_CLONES void update_run(
    float* p, float* m, float* v, const void* g, Kind grad_kind, void* out, Kind out_kind, std::int64_t n,
    const Coeffs& c) {
  switch (grad_kind) {
    case Kind::f32: return update_out<Kind::f32>(p, m, v, g, out, out_kind, n, c);
    case Kind::bf16: return update_out<Kind::bf16>(p, m, v, g, out, out_kind, n, c);
    case Kind::f16: return update_out<Kind::f16>(p, m, v, g, out, out_kind, n, c);
    case Kind::none: return;
  }
}

}  // namespace
}  // namespace tessera::optim

#pragma GCC pop_options

namespace tessera::optim {
namespace {

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
  check_disjoint(param, "param", exp_avg, "exp_avg");
  check_disjoint(param, "param", exp_avg_sq, "exp_avg_sq");
  check_disjoint(exp_avg, "exp_avg", exp_avg_sq, "exp_avg_sq");
  for (const auto& [t, name] : {std::pair{&param, "param"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"}})
    check_disjoint(*t, name, grad, "grad");
  if (param_out)
    for (const auto& [t, name] : {std::pair{&param, "param"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"}})
      check_disjoint(*t, name, *param_out, "param_out");
  if (n == 0) return;

  const double t = static_cast<double>(hyper.step);
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, t);
  const Coeffs c{static_cast<float>(1.0 - hyper.lr * hyper.weight_decay),
                 static_cast<float>(hyper.beta1),
                 static_cast<float>(1.0 - hyper.beta1),
                 static_cast<float>(hyper.beta2),
                 static_cast<float>(1.0 - hyper.beta2),
                 static_cast<float>(std::sqrt(1.0 - std::pow(hyper.beta2, t))),
                 static_cast<float>(hyper.eps),
                 static_cast<float>(-hyper.lr / bias_correction1),
                 static_cast<float>(hyper.grad_scale)};
  const Kind grad_kind = kind_of(grad.scalar_type());
  const Kind out_kind = param_out ? kind_of(param_out->scalar_type()) : Kind::none;

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
      update_run(reinterpret_cast<float*>(row(0)), reinterpret_cast<float*>(row(1)), reinterpret_cast<float*>(row(2)),
                 row(ntensors - 1), grad_kind, param_out ? row(3) : nullptr, out_kind, size0, c);
    }
  });
}

}  // namespace tessera::optim
