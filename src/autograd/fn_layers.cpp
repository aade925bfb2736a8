// Differentiable embedding, norms, rotary embedding and cross-entropy: each
// runs its raw op from ops/ on detached inputs and records a node whose
// closure keeps what the op's backward needs (inputs and the forward's
// per-row statistics; never a softmax or a normalized copy of x).
#include "autograd/functions.h"
#include "autograd/record.h"
#include "autograd/trace.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace lt {

using Inputs = std::vector<Tensor>;

using autograd::needs_graph;
using autograd::record;

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if (autograd::tracing())
    return autograd::traced("embedding", {weight, ids}, {},
                            [](const Inputs& in) { return embedding(in[0], in[1]); });
  LT_CHECK(!ids.requires_grad(), "embedding: ids cannot require grad");
  Tensor di = ids.detach();
  const int64_t vocab = weight.dim() == 2 ? weight.size(0) : 0;
  return record("embedding", {weight, ids}, ops::embedding(weight.detach(), di),
                [di, vocab](const Tensor& g) {
                  return std::vector<Tensor>{ops::embedding_backward(g, di, vocab), Tensor()};
                });
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  if (autograd::tracing())
    return autograd::traced("rms_norm", {x, weight}, {eps},
                            [eps](const Inputs& in) { return rms_norm(in[0], in[1], eps); });
  Tensor dx = x.detach(), dw = weight.detach();
  ops::RmsNormOutput out = ops::rms_norm(dx, dw, eps);
  if (!needs_graph({&x, &weight})) return out.y;
  const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
  return record("rms_norm", {x, weight}, out.y,
                [dx, dw, rstd = out.rstd, need_x, need_w](const Tensor& g) {
                  ops::RmsNormGrads grads = ops::rms_norm_backward(g, dx, dw, rstd, need_x, need_w);
                  return std::vector<Tensor>{grads.dx, grads.dweight};
                });
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (autograd::tracing())
    return autograd::traced("layer_norm", {x, weight, bias}, {eps}, [eps](const Inputs& in) {
      return layer_norm(in[0], in[1], in[2], eps);
    });
  Tensor dx = x.detach();
  Tensor dw = weight.defined() ? weight.detach() : Tensor();
  Tensor db = bias.defined() ? bias.detach() : Tensor();
  ops::LayerNormOutput out = ops::layer_norm(dx, dw, db, eps);
  if (!needs_graph({&x, &weight, &bias})) return out.y;
  const bool need_x = x.requires_grad();
  const bool need_w = weight.defined() && weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  return record(
      "layer_norm", {x, weight, bias}, out.y,
      [dx, dw, mean = out.mean, rstd = out.rstd, need_x, need_w, need_b](const Tensor& g) {
        ops::LayerNormGrads grads =
            ops::layer_norm_backward(g, dx, dw, mean, rstd, need_x, need_w, need_b);
        return std::vector<Tensor>{grads.dx, grads.dweight, grads.dbias};
      });
}

RopeTable make_rope_table(int64_t head_dim, int64_t max_positions, double theta,
                          const RopeScaling& scaling) {
  std::vector<double> inv_freq = ops::rope_inv_freq(head_dim, theta);
  if (scaling.type == "llama3") {
    inv_freq = ops::rope_llama3_scaling(std::move(inv_freq), scaling.factor,
                                        scaling.low_freq_factor, scaling.high_freq_factor,
                                        scaling.original_max_position_embeddings);
  } else {
    LT_CHECK(scaling.type == "default", "make_rope_table: unsupported rope_scaling type '",
             scaling.type, "' (supported: default, llama3)");
  }
  ops::RopeCosSin cs = ops::rope_cos_sin(inv_freq, max_positions);
  return RopeTable{cs.cos, cs.sin, head_dim};
}

Tensor rotary_embedding(const Tensor& x, const RopeTable& table, const Tensor& positions) {
  if (autograd::tracing())
    return autograd::traced(
        "rotary_embedding", {x, positions, table.cos, table.sin}, {},
        [head_dim = table.head_dim](const Inputs& in) {
          return rotary_embedding(in[0], RopeTable{in[2], in[3], head_dim}, in[1]);
        });
  LT_CHECK(x.dim() == 4 && x.size(3) == table.head_dim, "rotary_embedding: x must be [B, T, H, ",
           table.head_dim, "] for this table, got ", x.str());
  Tensor pos = positions.defined() ? positions.detach() : Tensor();
  return record("rotary_embedding", {x}, ops::rotary(x.detach(), table.cos, table.sin, pos),
                [cos = table.cos, sin = table.sin, pos](const Tensor& g) {
                  return std::vector<Tensor>{ops::rotary_backward(g, cos, sin, pos)};
                });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  Tensor dl = logits.detach(), dt = targets.detach();
  ops::CrossEntropyOutput out = ops::cross_entropy(dl, dt, ignore_index);
  if (!needs_graph({&logits})) return out.loss;
  return record("cross_entropy", {logits, targets}, out.loss,
                [dl, dt, lse = out.lse, count = out.count, ignore_index](const Tensor& g) {
                  return std::vector<Tensor>{
                      ops::cross_entropy_backward(g, dl, dt, lse, ignore_index, count), Tensor()};
                });
}

}  // namespace lt
