// The language-model head's loss, fused with its projection and chunked
// over rows so that the full [N, V] logits never exist at once: forward
// keeps only one logsumexp per row, backward recomputes each chunk's logits.
// On a GPU, when a graph is recorded, the fused classifier runs instead
// (fused_lm_head_loss below; LT_LM_HEAD=unfused keeps the chunked head).
#include <algorithm>

#include "autograd/cross_entropy_kernels.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/record.h"
#include "compile/cross_entropy_chain.h"
#include "ops/classifier.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace lt {

namespace {

// Rows per chunk: about 16 M logits (64 MB in f32) at a time on the host.
// On a GPU about 256 M (512 MB in bf16): each chunk costs a loss read-back
// (a stream sync) and its GEMMs want many rows (a 3B model's 8192 rows are
// then 5 chunks of ~1770, not 75 of 110).
int64_t chunk_rows_for(int64_t vocab, Device device) {
  const int64_t logits = device.is_cuda() ? int64_t{1} << 28 : int64_t{1} << 24;
  return std::max<int64_t>(1, logits / vocab);
}

struct Chunk {
  int64_t begin, end;
  int64_t count;  // counted targets in this chunk
  Tensor lse;
};

// The loss's gradient as a number: backward(loss)'s own seed is 1 without
// a read-back (which would wait for the whole forward on a GPU).
double loss_gradient(const Tensor& g) {
  return autograd::is_unit_seed(g) ? 1.0 : g.item();
}

// On a GPU, with a graph to record: ops/classifier.h's fused head, whose
// forward computes the loss and both gradients for a loss gradient of 1
// (the executors' backward(loss)); backward only scales them by the actual
// one. No logits are computed twice and nothing is read back per chunk.
Tensor fused_lm_head_loss(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                          double loss_denominator, int64_t ignore_index) {
  ops::LmHeadLossGrads f = ops::lm_head_loss_grads(
      hidden.detach(), weight.detach(), targets.detach(), loss_denominator, ignore_index,
      chunk_rows_for(weight.size(0), weight.device()) * weight.size(0), ops::kLmHeadPadVocabTo);
  const bool need_h = hidden.requires_grad(), need_w = weight.requires_grad();
  return autograd::record(
      "lm_head_loss", {hidden, weight}, f.loss,
      [dh = f.hidden, dw = f.weight, need_h, need_w](const Tensor& g) {
        const double g_value = loss_gradient(g);
        auto scaled = [&](const Tensor& t) { return g_value == 1.0 ? t : ops::scale(t, g_value); };
        return std::vector<Tensor>{need_h ? scaled(dh) : Tensor(), need_w ? scaled(dw) : Tensor()};
      });
}

}  // namespace

Tensor lm_head_loss(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                    double loss_denominator, int64_t ignore_index) {
  LT_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
           "lm_head_loss: hidden ", hidden.str(), " and weight ", weight.str(), " do not match");
  LT_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0), "lm_head_loss: targets ",
           targets.str(), " for hidden ", hidden.str());
  LT_CHECK(loss_denominator > 0, "lm_head_loss: loss_denominator must be positive");
  Tensor h = hidden.detach(), w = weight.detach();
  if (h.device().is_cuda() && ops::fused_lm_head_enabled() &&
      autograd::needs_graph({&hidden, &weight})) {
    return fused_lm_head_loss(hidden, weight, targets, loss_denominator, ignore_index);
  }
  // train.compile: the chunks' cross-entropy as compiled kernels (on the
  // CPU; the backward writes the gradient over the logits, as ops' does).
  const std::shared_ptr<compile::KernelCache> kernels =
      h.device().is_cpu() && (h.dtype() == DType::F32 || h.dtype() == DType::BF16)
          ? autograd::cross_entropy_kernels()
          : nullptr;
  const int64_t n = h.size(0);
  const int64_t step = chunk_rows_for(w.size(0), w.device());
  std::vector<Chunk> chunks;
  // Each chunk's mean loss stays where it was computed until all chunks are
  // done: on a GPU the cross-entropy already waits once per chunk (for its
  // count), and the losses then come back in one copy, not one read each.
  Tensor chunk_losses;
  for (int64_t b = 0, i = 0; b < n; b += step, ++i) {
    int64_t e = std::min(n, b + step);
    Tensor logits = ops::linear(h.slice(0, b, e), w);
    ops::CrossEntropyOutput ce =
        kernels ? compile::compiled_cross_entropy(*kernels, logits, targets.slice(0, b, e),
                                                  ignore_index)
                : ops::cross_entropy(logits, targets.slice(0, b, e), ignore_index);
    if (!chunk_losses.defined()) {
      chunk_losses = Tensor::empty({(n + step - 1) / step}, ce.loss.dtype(), ce.loss.device());
    }
    chunk_losses.slice(0, i, i + 1).copy_(ce.loss.reshape({1}));
    chunks.push_back({b, e, ce.count, ce.lse});
  }
  double total = 0;
  if (chunk_losses.defined()) {
    const std::vector<double> losses = chunk_losses.to_doubles();
    for (size_t i = 0; i < chunks.size(); ++i) {
      total += losses[i] * static_cast<double>(chunks[i].count);
    }
  }
  // f32 like cross_entropy's loss, f64 when checking gradients in f64.
  Tensor loss =
      Tensor::scalar(total / loss_denominator, h.dtype() == DType::F64 ? DType::F64 : DType::F32);
  bool need_h = hidden.requires_grad(), need_w = weight.requires_grad();
  return autograd::record(
      "lm_head_loss", {hidden, weight}, loss,
      [h, w, targets, chunks, loss_denominator, ignore_index, need_h, need_w,
       kernels](const Tensor& g) {
        const double g_value = loss_gradient(g);
        Tensor dh = need_h ? Tensor::empty(h.shape(), h.dtype(), h.device()) : Tensor();
        Tensor dw;
        for (const Chunk& c : chunks) {
          Tensor hc = h.slice(0, c.begin, c.end);
          if (c.count == 0) {
            if (need_h) dh.slice(0, c.begin, c.end).zero_();
            continue;
          }
          // A chunk's logits are vocabulary-wide: their gradient is written
          // over them, and the weight gradient is added into its running sum
          // by the GEMM, so the chunk needs its logits' memory once and the
          // sum no temporary (exec/memory_budget.cpp counts the head so).
          Tensor dlogits = ops::linear(hc, w);
          const double chunk_gradient = g_value * static_cast<double>(c.count) / loss_denominator;
          if (kernels) {
            compile::compiled_cross_entropy_backward_(*kernels, chunk_gradient, dlogits,
                                                      targets.slice(0, c.begin, c.end), c.lse,
                                                      ignore_index, c.count);
          } else {
            ops::cross_entropy_backward_(Tensor::scalar(chunk_gradient, DType::F64), dlogits,
                                         targets.slice(0, c.begin, c.end), c.lse, ignore_index,
                                         c.count);
          }
          if (need_h) {
            ops::LinearGrads lg = ops::linear_backward(dlogits, Tensor(), w, true, false, false);
            dh.slice(0, c.begin, c.end).copy_(lg.x);
          }
          if (need_w) dw = ops::linear_weight_grad_sum(dlogits, hc, dw);
        }
        if (need_w)
          dw = dw.defined() ? dw.to(w.dtype()) : Tensor::zeros(w.shape(), w.dtype(), w.device());
        return std::vector<Tensor>{dh, dw};
      });
}

}  // namespace lt
