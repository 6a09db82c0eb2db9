// Adam8bit's update: a fused multi-threaded loop over 256-blocks for CPU buffers, the CUDA kernel of
// src/optim_cuda/ (TESSERA_WITH_CUDA) or tensor ops for CUDA buffers.
#include "tessera/optim/adam8bit.hpp"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "tessera/core/parallel.hpp"
#include "tessera/quant/blockwise8.hpp"

#ifdef TESSERA_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "tessera/optim/adam8bit_cuda.hpp"
#endif

namespace tessera {
namespace {

using Span = Adam8bit::Span;
using State = Adam8bit::State;
constexpr std::int64_t kBlock = Adam8bit::block;

std::int64_t num_blocks(std::int64_t n) { return (n + kBlock - 1) / kBlock; }

// The step's fp32 coefficients, shared by every path (bitsandbytes' form of the update):
//   p <- (p - step_size * m / (sqrt(v) + eps_hat)) * decay,  step_size = lr*sqrt(1-b2^t)/(1-b1^t),
//   eps_hat = eps*sqrt(1-b2^t), decay = 1 - lr*wd.
struct Coeffs {
  float b1, b2, one_minus_b1, one_minus_b2, eps, bc2_sqrt, eps_hat, step_size, decay;
};

Coeffs coefficients(std::int64_t steps, const StepHyper& hyper) {
  const double t = static_cast<double>(steps);
  const double bc1 = 1.0 - std::pow(hyper.beta1, t);
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(hyper.beta2, t));
  Coeffs c{};
  c.b1 = static_cast<float>(hyper.beta1);
  c.b2 = static_cast<float>(hyper.beta2);
  c.one_minus_b1 = 1.0f - c.b1;
  c.one_minus_b2 = 1.0f - c.b2;
  c.eps = static_cast<float>(Adam8bit::eps);
  c.bc2_sqrt = static_cast<float>(bc2_sqrt);
  c.eps_hat = c.eps * c.bc2_sqrt;
  c.step_size = static_cast<float>(hyper.lr * bc2_sqrt / bc1);
  c.decay = static_cast<float>(1.0 - hyper.lr * hyper.weight_decay);
  return c;
}

void check_buffers(const State& state, const at::Tensor& param, const at::Tensor& grad) {
  TORCH_CHECK(param.is_contiguous(), "Adam8bit: the parameter buffer must be contiguous");
  TORCH_CHECK(grad.numel() == param.numel(), "Adam8bit: ", grad.numel(), " gradients for ", param.numel(),
              " parameters");
  TORCH_CHECK(grad.device() == param.device(), "Adam8bit: gradients on ", grad.device(), ", parameters on ",
              param.device());
  const at::Tensor& any = state.m_codes.defined() ? state.m_codes : state.m32;
  TORCH_CHECK(!any.defined() || any.device() == param.device(), "Adam8bit: state on ", any.device(),
              ", parameters on ", param.device());
  TORCH_CHECK(at::isFloatingType(param.scalar_type()) && at::isFloatingType(grad.scalar_type()),
              "Adam8bit: parameters and gradients must be floating point");
  if (!state.spans.empty()) {
    const Span& last = state.spans.back();
    TORCH_CHECK(last.offset + last.length <= param.numel(), "Adam8bit: the state covers ", last.offset + last.length,
                " elements, the buffer has ", param.numel());
  }
}

// ---- CPU: fused loops ----

// One 256-block of an 8-bit span: dequantize, update in fp32, requantize with the new absmax.
template <class P, class G>
void update_block(P* p, const G* g, std::uint8_t* mc, std::uint8_t* vc, float* m_absmax, float* v_absmax,
                  std::int64_t len, const Coeffs& c) {
  static const float* smap = quant::dynamic_map(true).data_ptr<float>();
  static const float* umap = quant::dynamic_map(false).data_ptr<float>();
  static const quant::CodeLookup& m_nearest = quant::dynamic_code_lookup(true);
  static const quant::CodeLookup& v_nearest = quant::dynamic_code_lookup(false);
  float m[kBlock], v[kBlock];
  const float ma = *m_absmax, va = *v_absmax;
  float new_ma = 0.0f, new_va = 0.0f;
  for (std::int64_t j = 0; j < len; ++j) {
    const float gj = static_cast<float>(g[j]);
    m[j] = smap[mc[j]] * ma * c.b1 + c.one_minus_b1 * gj;
    v[j] = umap[vc[j]] * va * c.b2 + c.one_minus_b2 * gj * gj;
    new_ma = std::max(new_ma, std::abs(m[j]));
    new_va = std::max(new_va, v[j]);
  }
  for (std::int64_t j = 0; j < len; ++j) {
    const float pj = static_cast<float>(p[j]) - c.step_size * (m[j] / (std::sqrt(v[j]) + c.eps_hat));
    p[j] = static_cast<P>(pj * c.decay);
  }
  const float inv_m = new_ma > 0.0f ? 1.0f / new_ma : 0.0f;
  const float inv_v = new_va > 0.0f ? 1.0f / new_va : 0.0f;
  for (std::int64_t j = 0; j < len; ++j) {
    mc[j] = m_nearest(m[j] * inv_m);
    vc[j] = v_nearest(v[j] * inv_v);
  }
  *m_absmax = new_ma;
  *v_absmax = new_va;
}

template <class P, class G>
void update_fp32_span(P* p, const G* g, float* m, float* v, std::int64_t len, const Coeffs& c) {
  for (std::int64_t j = 0; j < len; ++j) {
    const float gj = static_cast<float>(g[j]);
    m[j] = m[j] * c.b1 + c.one_minus_b1 * gj;
    v[j] = v[j] * c.b2 + c.one_minus_b2 * gj * gj;
    const float pj = static_cast<float>(p[j]) - c.step_size * (m[j] / (std::sqrt(v[j]) + c.eps_hat));
    p[j] = static_cast<P>(pj * c.decay);
  }
}

template <class P, class G>
void step_cpu_typed(State& st, P* p, const G* g, const Coeffs& c) {
  std::vector<const Span*> q8, f32;
  for (const Span& s : st.spans) (s.quantized ? q8 : f32).push_back(&s);
  if (!q8.empty()) {
    std::uint8_t* mc = st.m_codes.data_ptr<std::uint8_t>();
    std::uint8_t* vc = st.v_codes.data_ptr<std::uint8_t>();
    float* ma = st.m_absmax.data_ptr<float>();
    float* va = st.v_absmax.data_ptr<float>();
    // Blocks are numbered across the 8-bit spans (the absmax index); each chunk finds its first span.
    tessera::parallel_for(0, st.m_absmax.numel(), 16, [&](std::int64_t b0, std::int64_t b1) {
      auto it = std::upper_bound(q8.begin(), q8.end(), b0,
                                 [](std::int64_t b, const Span* s) { return b < s->block_offset; });
      std::size_t s = static_cast<std::size_t>(it - q8.begin()) - 1;
      for (std::int64_t b = b0; b < b1; ++b) {
        while (b >= q8[s]->block_offset + num_blocks(q8[s]->length)) ++s;
        const Span& sp = *q8[s];
        const std::int64_t begin = (b - sp.block_offset) * kBlock;
        const std::int64_t len = std::min(kBlock, sp.length - begin);
        update_block(p + sp.offset + begin, g + sp.offset + begin, mc + sp.state_offset + begin,
                     vc + sp.state_offset + begin, ma + b, va + b, len, c);
      }
    });
  }
  if (!f32.empty()) {
    float* m = st.m32.data_ptr<float>();
    float* v = st.v32.data_ptr<float>();
    tessera::parallel_for(0, static_cast<std::int64_t>(f32.size()), 4, [&](std::int64_t s0, std::int64_t s1) {
      for (std::int64_t s = s0; s < s1; ++s) {
        const Span& sp = *f32[s];
        update_fp32_span(p + sp.offset, g + sp.offset, m + sp.state_offset, v + sp.state_offset, sp.length, c);
      }
    });
  }
}

void step_cpu(State& st, at::Tensor& param, const at::Tensor& grad_in, const Coeffs& c) {
  const at::Tensor grad = grad_in.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, param.scalar_type(), "Adam8bit param", [&] {
    using P = scalar_t;
    P* p = param.data_ptr<P>();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "Adam8bit grad", [&] {
      step_cpu_typed(st, p, grad.data_ptr<scalar_t>(), c);
    });
  });
}

// ---- Tensor ops (CUDA without the kernel; the tests run them on the CPU) ----

// p <- (p - step_size * m / (sqrt(v) + eps_hat)) * decay on one slice, in fp32, written back rounded.
void apply_update(at::Tensor param_slice, const at::Tensor& m, const at::Tensor& v, const Coeffs& c) {
  at::Tensor p32 = param_slice.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
  p32.sub_(m / (v.sqrt() + static_cast<double>(c.eps_hat)) * static_cast<double>(c.step_size));
  if (c.decay != 1.0f) p32.mul_(static_cast<double>(c.decay));
  param_slice.copy_(p32);
}

void step_fp32_spans_tensor_ops(State& st, at::Tensor& param, const at::Tensor& grad, const Coeffs& c) {
  for (const Span& sp : st.spans) {
    if (sp.quantized) continue;
    const at::Tensor g = grad.slice(0, sp.offset, sp.offset + sp.length).to(at::kFloat);
    at::Tensor m = st.m32.slice(0, sp.state_offset, sp.state_offset + sp.length);
    at::Tensor v = st.v32.slice(0, sp.state_offset, sp.state_offset + sp.length);
    m.mul_(static_cast<double>(c.b1)).add_(g, static_cast<double>(c.one_minus_b1));
    v.mul_(static_cast<double>(c.b2)).addcmul_(g, g, static_cast<double>(c.one_minus_b2));
    apply_update(param.slice(0, sp.offset, sp.offset + sp.length), m, v, c);
  }
}

void step_tensor_ops(State& st, at::Tensor& param, const at::Tensor& grad, const Coeffs& c) {
  for (const Span& sp : st.spans) {
    if (!sp.quantized) continue;
    const std::int64_t s0 = sp.state_offset, s1 = s0 + sp.length;
    const std::int64_t b0 = sp.block_offset, b1 = b0 + num_blocks(sp.length);
    const quant::Blockwise8 mq{st.m_codes.slice(0, s0, s1), st.m_absmax.slice(0, b0, b1), kBlock, true};
    const quant::Blockwise8 vq{st.v_codes.slice(0, s0, s1), st.v_absmax.slice(0, b0, b1), kBlock, false};
    at::Tensor m = quant::detail::dequantize_blockwise_tensor_ops(mq);
    at::Tensor v = quant::detail::dequantize_blockwise_tensor_ops(vq);
    const at::Tensor g = grad.slice(0, sp.offset, sp.offset + sp.length).to(at::kFloat);
    m.mul_(static_cast<double>(c.b1)).add_(g, static_cast<double>(c.one_minus_b1));
    v.mul_(static_cast<double>(c.b2)).addcmul_(g, g, static_cast<double>(c.one_minus_b2));
    apply_update(param.slice(0, sp.offset, sp.offset + sp.length), m, v, c);
    const quant::Blockwise8 m_new = quant::detail::quantize_blockwise_tensor_ops(m, true, kBlock);
    const quant::Blockwise8 v_new = quant::detail::quantize_blockwise_tensor_ops(v, false, kBlock);
    mq.codes.copy_(m_new.codes);
    mq.absmax.copy_(m_new.absmax);
    vq.codes.copy_(v_new.codes);
    vq.absmax.copy_(v_new.absmax);
  }
  step_fp32_spans_tensor_ops(st, param, grad, c);
}

#ifdef TESSERA_WITH_CUDA
cuda::FloatType cuda_float_type(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return cuda::FloatType::f32;
    case at::kHalf: return cuda::FloatType::f16;
    case at::kBFloat16: return cuda::FloatType::bf16;
    default: TORCH_CHECK(false, "Adam8bit: CUDA parameters must be fp32, fp16 or bf16, got ", t);
  }
}

void step_cuda(State& st, at::Tensor& param, const at::Tensor& grad_in, const Coeffs& c) {
  const c10::cuda::CUDAGuard guard(param.device());
  const c10::ScalarType gt = grad_in.scalar_type();
  const at::Tensor grad =
      (gt == at::kFloat || gt == at::kHalf || gt == at::kBFloat16) ? grad_in.contiguous() : grad_in.to(at::kFloat);
  if (!st.map_signed.defined() || st.map_signed.device() != param.device()) {
    st.map_signed = quant::dynamic_map(true).to(param.device());
    st.map_unsigned = quant::dynamic_map(false).to(param.device());
  }
  void* stream = at::cuda::getCurrentCUDAStream(param.device().index()).stream();
  char* p = static_cast<char*>(param.data_ptr());
  const char* g = static_cast<const char*>(grad.data_ptr());
  const std::int64_t p_size = param.element_size(), g_size = grad.element_size();
  for (const Span& sp : st.spans) {
    if (!sp.quantized) continue;
    const char* error = cuda::adam8bit_cuda_step(
        p + sp.offset * p_size, cuda_float_type(param.scalar_type()), g + sp.offset * g_size,
        cuda_float_type(grad.scalar_type()), st.m_codes.data_ptr<std::uint8_t>() + sp.state_offset,
        st.v_codes.data_ptr<std::uint8_t>() + sp.state_offset, st.m_absmax.data_ptr<float>() + sp.block_offset,
        st.v_absmax.data_ptr<float>() + sp.block_offset, st.map_signed.data_ptr<float>(),
        st.map_unsigned.data_ptr<float>(), sp.length, kBlock, c.b1, c.b2, c.eps, c.step_size, c.bc2_sqrt, c.decay,
        stream);
    TORCH_CHECK(error == nullptr, "Adam8bit: CUDA kernel launch failed: ", error);
  }
  step_fp32_spans_tensor_ops(st, param, grad, c);
}
#endif

}  // namespace

Adam8bit::State Adam8bit::init(const at::Tensor& flat_param, c10::ScalarType state_dtype) {
  const ParamSegment whole{0, flat_param.numel(), flat_param.numel()};
  return init(flat_param, state_dtype, std::span<const ParamSegment>(&whole, 1));
}

// state_dtype is ignored: codes are uint8 and absmax, small tensors' m and v fp32, whatever the precision.
Adam8bit::State Adam8bit::init(const at::Tensor& flat_param, c10::ScalarType, std::span<const ParamSegment> segments) {
  std::vector<ParamSegment> sorted;
  for (const ParamSegment& s : segments) {
    TORCH_CHECK(s.offset >= 0 && s.length >= 0 && s.offset + s.length <= flat_param.numel(),
                "Adam8bit: segment [", s.offset, ", ", s.offset + s.length, ") outside a buffer of ",
                flat_param.numel());
    if (s.length > 0) sorted.push_back(s);
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  State st;
  std::int64_t n8 = 0, blocks = 0, n32 = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const ParamSegment& s = sorted[i];
    TORCH_CHECK(i == 0 || sorted[i - 1].offset + sorted[i - 1].length <= s.offset, "Adam8bit: segments overlap at ",
                s.offset);
    Span span{s.offset, s.length, s.tensor_numel >= min_8bit_size, 0, 0};
    if (span.quantized) {
      span.state_offset = n8;
      span.block_offset = blocks;
      n8 += s.length;
      blocks += num_blocks(s.length);
    } else {
      span.state_offset = n32;
      n32 += s.length;
    }
    st.spans.push_back(span);
  }
  const auto opts = at::TensorOptions().device(flat_param.device());
  if (n8 > 0) {
    // Code 127 of the signed map and code 0 of the unsigned one are 0 (absmax 0 alone would do).
    st.m_codes = at::full({n8}, 127, opts.dtype(at::kByte));
    st.v_codes = at::zeros({n8}, opts.dtype(at::kByte));
    st.m_absmax = at::zeros({blocks}, opts.dtype(at::kFloat));
    st.v_absmax = at::zeros({blocks}, opts.dtype(at::kFloat));
  }
  if (n32 > 0) {
    st.m32 = at::zeros({n32}, opts.dtype(at::kFloat));
    st.v32 = at::zeros({n32}, opts.dtype(at::kFloat));
  }
  return st;
}

void Adam8bit::step(State& state, at::Tensor& flat_param, const at::Tensor& flat_grad, const StepHyper& hyper) {
  at::NoGradGuard no_grad;
  check_buffers(state, flat_param, flat_grad);
  state.steps += 1;
  // A dry run (meta tensors): the CPU loop and the CUDA kernel update in place, allocating nothing.
  if (flat_param.is_meta()) return;
  const Coeffs c = coefficients(state.steps, hyper);
  if (flat_param.is_cpu()) {
    step_cpu(state, flat_param, flat_grad, c);
    return;
  }
#ifdef TESSERA_WITH_CUDA
  if (flat_param.is_cuda()) {
    step_cuda(state, flat_param, flat_grad, c);
    return;
  }
#endif
  step_tensor_ops(state, flat_param, flat_grad, c);
}

std::int64_t Adam8bit::state_bytes(const State& state) {
  auto bytes = [](const at::Tensor& t) { return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0; };
  return bytes(state.m_codes) + bytes(state.v_codes) + bytes(state.m_absmax) + bytes(state.v_absmax) +
         bytes(state.m32) + bytes(state.v32);
}

namespace detail {

void adam8bit_step_tensor_ops(Adam8bit::State& state, at::Tensor& flat_param, const at::Tensor& flat_grad,
                              const StepHyper& hyper) {
  at::NoGradGuard no_grad;
  check_buffers(state, flat_param, flat_grad);
  state.steps += 1;
  step_tensor_ops(state, flat_param, flat_grad, coefficients(state.steps, hyper));
}

}  // namespace detail
}  // namespace tessera
