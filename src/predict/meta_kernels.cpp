// implements: register_meta_kernels (predict/dry_run.hpp). LibTorch's C++ library lacks meta kernels for a few
// operators (Python registers them); a dry run needs them to run a training step on meta tensors. Each computes only
// the output's shape and dtype, as the real kernel allocates it. Scaled dot-product attention on meta tensors picks
// the backend the target device would (LibTorch's own choice, asked with storage-less tensors of the same shapes),
// so the autograd graph saves what the real one does: output and log-sum-exp for the fused kernels, the attention
// weights for the math path. LibTorch's fused RMSNorm (a CUDA kernel) saves what its CUDA autograd node does.
#include <ATen/ATen.h>
#include <c10/core/DispatchKey.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <memory>
#include <tuple>
#include <mutex>
#include <optional>
#include <vector>

#include "tessera/engine/job.hpp"
#include "tessera/predict/dry_run.hpp"

namespace tessera::predict {
namespace {

at::Tensor index_select_meta(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  std::vector<int64_t> sizes = self.sizes().vec();
  if (!sizes.empty()) sizes[static_cast<std::size_t>(c10::maybe_wrap_dim(dim, self.dim()))] = index.numel();
  return at::empty(sizes, self.options());
}

at::Tensor where_meta(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  return at::empty(at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes()),
                   self.options().dtype(at::result_type(self, other)));
}

at::Tensor& where_out_meta(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                           at::Tensor& out) {
  out.resize_(at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes()));
  return out;
}

at::Tensor embedding_backward_meta(const at::Tensor& grad, const at::Tensor&, c10::SymInt num_weights, c10::SymInt,
                                   bool) {
  return at::empty({num_weights.expect_int(), grad.size(-1)}, grad.options());
}

// (B, H, L, ev) in q's memory order (its dimensions by falling stride): what empty_like(q) gives with v's head size.
at::Tensor empty_in_order_of(const at::Tensor& q, std::int64_t ev) {
  std::array<std::int64_t, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return q.stride(a) > q.stride(b); });
  std::array<std::int64_t, 4> sizes{}, back{};
  for (std::size_t i = 0; i < order.size(); ++i) {
    sizes[i] = order[i] == 3 ? ev : q.size(order[i]);
    back[order[i]] = static_cast<std::int64_t>(i);
  }
  return at::empty(sizes, q.options()).permute(back);
}

// _scaled_dot_product_flash_attention_for_cpu: output (B, H, L, Ev) laid out as (B, L, H, Ev), logsumexp (B, H, L)
// fp32 laid out as (B, L, H). It also stands for a CUDA target's fused kernels (sdp_choice below), whose output
// differs in layout only: the flash kernel's (16-bit floats) is allocated like q, in q's memory order, so that a q
// contiguous as (B, H, L, D) gives an output whose (B, L, H * Ev) view downstream is a copy; the memory-efficient
// kernel's (fp32) is (B, L, H, Ev) as the CPU's.
std::tuple<at::Tensor, at::Tensor> flash_cpu_meta(const at::Tensor& q, const at::Tensor&, const at::Tensor& v, double,
                                                  bool, const std::optional<at::Tensor>&, std::optional<double>) {
  const auto b = q.size(0), h = q.size(1), l = q.size(2);
  const bool cuda_flash = DryRunScope::active_target() == c10::DeviceType::CUDA &&
                          (q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf);
  at::Tensor out = cuda_flash ? empty_in_order_of(q, v.size(3))
                              : at::empty({b, l, h, v.size(3)}, q.options()).transpose(1, 2);
  at::Tensor lse = at::empty({b, l, h}, q.options().dtype(at::kFloat)).transpose(1, 2);
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_cpu_backward_meta(const at::Tensor&, const at::Tensor& q,
                                                                       const at::Tensor& k, const at::Tensor& v,
                                                                       const at::Tensor&, const at::Tensor&, double,
                                                                       bool, const std::optional<at::Tensor>&,
                                                                       std::optional<double>) {
  return {at::empty_like(q), at::empty_like(k), at::empty_like(v)};
}

at::Tensor& abs_out_meta(const at::Tensor& self, at::Tensor& out) {
  out.resize_(self.sizes());
  return out;
}

// Convolution (ViT's and BLIP-2's patch embeddings): meta tensors take LibTorch's "overrideable" backend.
at::Tensor convolution_meta(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>&,
                            c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                            bool transposed, c10::SymIntArrayRef, c10::SymInt) {
  TORCH_CHECK(!transposed, "tessera's dry run has no meta kernel for transposed convolution");
  std::vector<int64_t> out{input.size(0), weight.size(0)};
  for (int64_t d = 2; d < input.dim(); ++d) {
    const auto i = static_cast<std::size_t>(d - 2);
    const int64_t s = stride[i].expect_int(), p = padding[i].expect_int(), dl = dilation[i].expect_int();
    out.push_back((input.size(d) + 2 * p - dl * (weight.size(d) - 1) - 1) / s + 1);
  }
  return at::empty(out, input.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_meta(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef,
    c10::SymIntArrayRef, c10::SymIntArrayRef, bool, c10::SymIntArrayRef, c10::SymInt, std::array<bool, 3> mask) {
  return {mask[0] ? at::empty_like(input) : at::Tensor(), mask[1] ? at::empty_like(weight) : at::Tensor(),
          mask[2] ? at::empty({weight.size(0)}, grad_output.options()) : at::Tensor()};
}

// Layer norm: the output, and the mean and 1/std per normalized row (the input's leading dims, then ones).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_meta(const at::Tensor& input, c10::SymIntArrayRef normalized,
                                                               const std::optional<at::Tensor>&,
                                                               const std::optional<at::Tensor>&, double) {
  std::vector<int64_t> stat(input.sizes().begin(), input.sizes().end());
  for (std::size_t i = stat.size() - normalized.size(); i < stat.size(); ++i) stat[i] = 1;
  return {at::empty_like(input, at::MemoryFormat::Contiguous), at::empty(stat, input.options()),
          at::empty(stat, input.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_meta(
    const at::Tensor&, const at::Tensor& input, c10::SymIntArrayRef, const at::Tensor&, const at::Tensor&,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  return {mask[0] ? at::empty_like(input, at::MemoryFormat::Contiguous) : at::Tensor(),
          mask[1] && weight && weight->defined() ? at::empty_like(*weight) : at::Tensor(),
          mask[2] && bias && bias->defined() ? at::empty_like(*bias) : at::Tensor()};
}

at::Tensor& logical_and_out_meta(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  out.resize_(at::infer_size(self.sizes(), other.sizes()));
  return out;
}

at::Tensor relu_meta(const at::Tensor& self) { return at::empty_like(self); }

// searchsorted / bucketize: one index per value (Adam8bit's and NF4's codes).
at::Tensor searchsorted_meta(const at::Tensor&, const at::Tensor& values, bool out_int32, bool,
                             std::optional<c10::string_view>, const std::optional<at::Tensor>&) {
  return at::empty(values.sizes(), values.options().dtype(out_int32 ? at::kInt : at::kLong));
}
at::Tensor bucketize_meta(const at::Tensor& values, const at::Tensor&, bool out_int32, bool) {
  return at::empty(values.sizes(), values.options().dtype(out_int32 ? at::kInt : at::kLong));
}

// A tensor with t's metadata on `device` and no storage: for asking LibTorch which attention kernel it would run.
// target_device: from_blob would otherwise ask the CUDA driver where the (null) pointer lives, and fail.
at::Tensor like_on(const at::Tensor& t, c10::DeviceType device) {
  at::Tensor x = at::for_blob(nullptr, t.sizes())
                     .strides(t.strides())
                     .target_device(c10::Device(device))
                     .options(at::TensorOptions().dtype(t.scalar_type()).device(device))
                     .make_tensor();
  if (t.requires_grad() && at::isFloatingType(t.scalar_type())) x.set_requires_grad(true);
  return x;
}

constexpr int64_t sdp_math = 0, sdp_flash = 1;

// Which backend the target would run: LibTorch's choice for the CPU (and for a CUDA device this process has);
// for a CUDA target without one, a fused kernel (flash for 16-bit floats, memory-efficient for fp32), both of which
// save the output and the log-sum-exp, as the CPU's flash kernel does.
int64_t sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& mask,
                   double dropout, bool causal, std::optional<double> scale, bool gqa) {
  const c10::DeviceType target = DryRunScope::active_target().value_or(c10::DeviceType::CPU);
  if (target == c10::DeviceType::CUDA && !at::hasCUDA()) return sdp_flash;
  const c10::DeviceType ask = target == c10::DeviceType::CUDA ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  std::optional<at::Tensor> m;
  if (mask) m = like_on(*mask, ask);
  const int64_t choice = at::_fused_sdp_choice(like_on(q, ask), like_on(k, ask), like_on(v, ask), m, dropout, causal,
                                               scale, gqa);
  return choice == sdp_math ? sdp_math : sdp_flash;
}

at::Tensor sdpa_autograd_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const std::optional<at::Tensor>& mask, double dropout, bool causal,
                              std::optional<double> scale, bool gqa) {
  const int64_t choice = sdp_choice(q, k, v, mask, dropout, causal, scale, gqa);
  std::optional<at::Tensor> m = mask;
  if (m && m->scalar_type() == at::kBool)  // sdpa turns a boolean mask into an additive one in the query's dtype
    m = at::empty(m->sizes(), q.options().requires_grad(false));
  if (choice == sdp_flash)
    return std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout, causal, m, scale));
  return std::get<0>(at::_scaled_dot_product_attention_math(q, k, v, m, dropout, causal, std::nullopt, scale, gqa));
}

// LibTorch's fused RMSNorm as its CUDA kernel runs it (models/llama.cpp calls it only for CUDA targets): the output
// in the input's dtype and the fp32 1/rms per row; autograd saves the input and that (FusedRmsNormBackward0), and
// the backward allocates the input's gradient. On meta tensors LibTorch would decompose it into the op-by-op form,
// which saves an fp32 copy of the input instead.
struct FusedRmsNormOnMeta : torch::autograd::Function<FusedRmsNormOnMeta> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                                                int64_t normalized_dims) {
    std::vector<int64_t> row = input.sizes().vec();
    for (int64_t i = 0; i < normalized_dims && !row.empty(); ++i) row[row.size() - 1 - static_cast<std::size_t>(i)] = 1;
    at::Tensor rstd = at::empty(row, input.options().dtype(at::kFloat));
    ctx->save_for_backward({input, rstd});
    ctx->mark_non_differentiable({rstd});
    return {at::empty_like(input), rstd};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list /*grads*/) {
    const auto saved = ctx->get_saved_variables();
    return {at::empty_like(saved[0]), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> fused_rms_norm_autograd_meta(const at::Tensor& input, c10::IntArrayRef shape,
                                                               const std::optional<at::Tensor>& weight,
                                                               std::optional<double>) {
  TORCH_CHECK(DryRunScope::active_target() == c10::DeviceType::CUDA,
              "tessera's dry run models _fused_rms_norm for CUDA targets only (its CPU form is the op-by-op one)");
  TORCH_CHECK(!weight || !weight->defined(), "tessera's dry run models _fused_rms_norm without a weight");
  auto out = FusedRmsNormOnMeta::apply(input, static_cast<int64_t>(shape.size()));
  return {out[0], out[1]};
}

bool has_kernel(const char* name, const char* overload, c10::DispatchKey key) {
  const auto op = c10::Dispatcher::singleton().findSchema({name, overload});
  return op && op->hasKernelForDispatchKey(key);
}

}  // namespace

void register_meta_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: the registrations must outlive every meta tensor.
    auto* meta = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
    auto missing = [](const char* name, const char* overload) {
      return !has_kernel(name, overload, c10::DispatchKey::Meta);
    };
    if (missing("aten::index_select", "")) meta->impl("index_select", index_select_meta);
    if (missing("aten::where", "self")) meta->impl("where.self", where_meta);
    if (missing("aten::where", "self_out")) meta->impl("where.self_out", where_out_meta);
    if (missing("aten::embedding_dense_backward", "")) meta->impl("embedding_dense_backward", embedding_backward_meta);
    if (missing("aten::_scaled_dot_product_flash_attention_for_cpu", ""))
      meta->impl("_scaled_dot_product_flash_attention_for_cpu", flash_cpu_meta);
    if (missing("aten::_scaled_dot_product_flash_attention_for_cpu_backward", ""))
      meta->impl("_scaled_dot_product_flash_attention_for_cpu_backward", flash_cpu_backward_meta);
    if (missing("aten::abs", "out")) meta->impl("abs.out", abs_out_meta);
    if (missing("aten::convolution_overrideable", "")) meta->impl("convolution_overrideable", convolution_meta);
    if (missing("aten::convolution_backward_overrideable", ""))
      meta->impl("convolution_backward_overrideable", convolution_backward_meta);
    if (missing("aten::native_layer_norm", "")) meta->impl("native_layer_norm", layer_norm_meta);
    if (missing("aten::native_layer_norm_backward", ""))
      meta->impl("native_layer_norm_backward", layer_norm_backward_meta);
    if (missing("aten::logical_and", "out")) meta->impl("logical_and.out", logical_and_out_meta);
    if (missing("aten::relu", "")) meta->impl("relu", relu_meta);
    if (missing("aten::searchsorted", "Tensor")) meta->impl("searchsorted.Tensor", searchsorted_meta);
    if (missing("aten::bucketize", "Tensor")) meta->impl("bucketize.Tensor", bucketize_meta);
    auto* autograd = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::AutogradMeta, __FILE__, __LINE__);
    autograd->impl("scaled_dot_product_attention", sdpa_autograd_meta);
    autograd->impl("_fused_rms_norm", fused_rms_norm_autograd_meta);
  });
}

}  // namespace tessera::predict
