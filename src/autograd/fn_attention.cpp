#include <cmath>

#include "autograd/functions.h"
#include "autograd/record.h"
#include "autograd/trace.h"
#include "ops/attention.h"

namespace lt {

using Inputs = std::vector<Tensor>;

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        std::optional<double> softmax_scale) {
  if (autograd::tracing())
    return autograd::traced("causal_attention", {q, k, v}, {}, [softmax_scale](const Inputs& in) {
      return causal_attention(in[0], in[1], in[2], softmax_scale);
    });
  LT_CHECK(q.defined() && q.dim() == 4, "causal_attention: q must be [B, T, Hq, D], got ",
           q.defined() ? q.str() : std::string("an undefined tensor"));
  const double scale = softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(3))));
  Tensor dq = q.detach(), dk = k.detach(), dv = v.detach();
  ops::AttentionForward fwd = ops::causal_attention_forward(dq, dk, dv, scale);
  if (!autograd::needs_graph({&q, &k, &v})) return fwd.out;
  // Saved: the inputs, the output and the per-row log-sum-exp; the backward
  // recomputes the probabilities from them. The output is saved detached:
  // the handle that carries grad_fn would otherwise own the node that owns it.
  Tensor saved_out = fwd.out.detach(), lse = fwd.lse;
  return autograd::record(
      "causal_attention", {q, k, v}, fwd.out, [dq, dk, dv, saved_out, lse, scale](const Tensor& g) {
        ops::AttentionGrads grads =
            ops::causal_attention_backward(g, dq, dk, dv, saved_out, lse, scale);
        return std::vector<Tensor>{grads.dq, grads.dk, grads.dv};
      });
}

}  // namespace lt
