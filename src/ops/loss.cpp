// implements: linear_cross_entropy (ops/loss.hpp): the op-by-op head and loss, or the blocked autograd node that
// keeps x, W and the per-row log-sum-exp only.
#include "tessera/ops/loss.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Vocabulary rows per block for `rows` logit rows of `hidden` columns: the block's fp32 logits and its fp32 rows of
// the weight within block_bytes, at least 64 and at least an eighth of the vocabulary. Each block costs two products
// of the head and about twenty elementwise kernels; at many rows (a GPU batch of 16 x 2048 tokens: 256 vocabulary
// rows per 32 MiB, 125 blocks) the launches and the narrow products cost more than the memory saved is worth, so a
// run has at most kMaxLossBlocks blocks (their fp32 logits an eighth of the whole form's, of which it holds three).
constexpr std::int64_t kMaxLossBlocks = 8;
std::int64_t block_size(std::int64_t vocab, std::int64_t rows, std::int64_t hidden, std::int64_t block_bytes) {
  const std::int64_t v = std::max<std::int64_t>(vocab, 1);
  const std::int64_t fewest = (v + kMaxLossBlocks - 1) / kMaxLossBlocks;
  return std::clamp<std::int64_t>(block_bytes / (4 * std::max<std::int64_t>({rows, hidden, 1})),
                                  std::min<std::int64_t>(std::max<std::int64_t>(64, fewest), v), v);
}

// a (n, k) @ b (k, m) in fp32 whatever a's and b's dtype: the products of 16-bit operands accumulate in fp32 as a
// 16-bit GEMM's do, and the result is not rounded (the blocks' partial sums of x's gradient are added in fp32).
at::Tensor product_fp32(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() == at::kFloat) return at::mm(a, b);
  if (a.is_cuda()) return at::mm(a, b, at::kFloat);  // cuBLAS: 16-bit inputs, fp32 output
  // A dry run's meta tensors: the CUDA kernel allocates its fp32 result and nothing else.
  if (a.is_meta()) return at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
  return at::mm(a.to(at::kFloat), b.to(at::kFloat));  // exact widening; LibTorch's CPU has no fp32-output mm
}

// Edges: x, weight (the targets are no input of autograd's: integers).
struct BlockedLinearCrossEntropy : torch::autograd::Function<BlockedLinearCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& targets, int64_t ignore_index, int64_t block_bytes, int64_t lowp) {
    const Gemm gemm{static_cast<Lowp>(lowp)};
    const at::Tensor h = x.reshape({-1, x.size(-1)}), t = targets.reshape({-1});
    const std::int64_t rows = h.size(0), vocab = weight.size(0), step = block_size(vocab, rows, h.size(1), block_bytes);
    const at::Tensor kept = t != ignore_index;
    const at::Tensor target = at::where(kept, t, 0);
    const auto f32 = h.options().dtype(at::kFloat);
    // Per row: the running maximum m and sum s of exp(z - m) over the blocks so far, and the target's logit.
    at::Tensor m = at::full({rows}, -std::numeric_limits<float>::infinity(), f32), s = at::zeros({rows}, f32);
    at::Tensor picked = at::zeros({rows}, f32);
    for (std::int64_t v0 = 0; v0 < vocab; v0 += step) {
      const std::int64_t n = std::min(step, vocab - v0);
      const at::Tensor z = gemm.linear(h, weight.narrow(0, v0, n)).to(at::kFloat);  // (rows, n)
      const at::Tensor m_new = at::maximum(m, z.amax(1));
      s = s * at::exp(m - m_new) + z.sub(m_new.unsqueeze(1)).exp_().sum(1);
      m = m_new;
      const at::Tensor here = (target >= v0).logical_and(target < v0 + n);
      const at::Tensor column = (target - v0).clamp(0, n - 1).unsqueeze(1);
      picked = picked + at::where(here, z.gather(1, column).squeeze(1), 0.0);
    }
    const at::Tensor lse = m + at::log(s);
    const at::Tensor count = kept.sum().to(at::kFloat);
    ctx->save_for_backward({x, weight, target, kept, lse, count});
    ctx->saved_data["lowp"] = lowp;
    ctx->saved_data["block_bytes"] = block_bytes;
    return at::where(kept, lse - picked, 0.0).sum() / count;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &target = saved[2], &kept = saved[3], &lse = saved[4],
                     &count = saved[5];
    const Gemm gemm{static_cast<Lowp>(ctx->saved_data["lowp"].toInt())};
    const at::Tensor h = x.reshape({-1, x.size(-1)});
    const std::int64_t rows = h.size(0), vocab = weight.size(0),
                       step = block_size(vocab, rows, h.size(1), ctx->saved_data["block_bytes"].toInt());
    const bool need_x = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
    // d loss / d z = g (softmax(z) - onehot(target)) / count on the kept rows, 0 on the others.
    const at::Tensor scale = at::where(kept, grads[0].to(at::kFloat) / count, 0.0).unsqueeze(1);
    at::Tensor dh = need_x ? at::zeros({rows, h.size(1)}, h.options().dtype(at::kFloat)) : at::Tensor();
    at::Tensor dweight = need_w ? at::empty_like(weight) : at::Tensor();
    for (std::int64_t v0 = 0; v0 < vocab && (need_x || need_w); v0 += step) {
      const std::int64_t n = std::min(step, vocab - v0);
      const at::Tensor block = weight.narrow(0, v0, n);
      at::Tensor p = gemm.linear(h, block).to(at::kFloat).sub_(lse.unsqueeze(1)).exp_();  // softmax, (rows, n)
      const at::Tensor here = (target >= v0).logical_and(target < v0 + n);
      p.scatter_add_(1, (target - v0).clamp(0, n - 1).unsqueeze(1),
                     at::where(here, -1.0, 0.0).to(at::kFloat).unsqueeze(1));
      const at::Tensor dz = p.mul_(scale).to(x.scalar_type());  // the op-by-op form's cast of the fp32 gradient
      if (need_w) {  // the block's rows of W's gradient, written in place where the product is LibTorch's own
        at::Tensor rows_of = dweight.narrow(0, v0, n);
        if (gemm.widens(dz))
          rows_of.copy_(gemm.matmul(dz.t(), h));
        else
          at::mm_out(rows_of, dz.t(), h);
      }
      if (need_x) dh.add_(product_fp32(dz, block));
    }
    return {need_x ? dh.to(x.scalar_type()).view(x.sizes()) : at::Tensor(), dweight, at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor linear_cross_entropy(const Gemm& gemm, const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& targets, std::int64_t ignore_index) {
  if (x.dim() < 1 || weight.dim() != 2 || x.size(-1) != weight.size(1))
    throw Error("ops::linear_cross_entropy: x " + c10::str(x.sizes()) + " and the head's weight " +
                c10::str(weight.sizes()) + " do not multiply; the weight must be (V, " +
                std::to_string(x.dim() ? x.size(-1) : 0) + ")");
  if (targets.numel() * x.size(-1) != x.numel())
    throw Error("ops::linear_cross_entropy: " + std::to_string(targets.numel()) + " targets for " +
                std::to_string(x.numel() / std::max<std::int64_t>(x.size(-1), 1)) +
                " rows of logits; give one target per row");
  const std::int64_t vocab = weight.size(0);
  // A label outside the vocabulary: refused here on the CPU (the op-by-op form's message would name no fix), by an
  // asynchronous device assert on a GPU (no wait for the forward to finish), not at all on a dry run's meta tensors.
  if (!x.is_meta()) {
    const at::Tensor t = targets.reshape({-1});
    const at::Tensor bad = t.ne(ignore_index).logical_and(t.lt(0).logical_or(t.ge(vocab)));
    const std::string fix = "; a label must be a token id below " + std::to_string(vocab) + " or " +
                            std::to_string(ignore_index) + " (ignored)";
    if (t.is_cpu() && bad.any().item<bool>())
      throw Error("ops::linear_cross_entropy: target " + std::to_string(t.masked_select(bad)[0].item<std::int64_t>()) +
                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")" + fix);
    if (!t.is_cpu()) at::_assert_async(bad.any().logical_not(), "a target is outside the vocabulary" + fix);
  }
  if (gemm.loss_block_bytes <= 0)
    return at::cross_entropy_loss(gemm.linear(x, weight).to(at::kFloat).view({-1, vocab}), targets.reshape({-1}), {},
                                  at::Reduction::Mean, ignore_index);
  return BlockedLinearCrossEntropy::apply(x, weight, targets, ignore_index, gemm.loss_block_bytes,
                                          static_cast<int64_t>(gemm.lowp));
}

}  // namespace tessera::ops
