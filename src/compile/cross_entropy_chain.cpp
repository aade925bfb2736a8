#include "compile/cross_entropy_chain.h"

#include <vector>

#include "compile/gpu_kernel.h"
#include "core/error.h"

namespace lt::compile {

namespace {

// 1 where the column is the row's target (both integers as floats): not
// less and not greater.
Value is_target(KernelGraph& g, Value column, Value target) {
  const Value zero = g.constant(0.0), one = g.constant(1.0);
  return g.select(g.less(column, target), zero, g.select(g.less(target, column), zero, one));
}

// 1 for a row that counts (target >= 0), else 0.
Value counts(KernelGraph& g, Value target) {
  return g.less(g.constant(-0.5), target);
}

struct Rows {
  Tensor target;  // [N] f32, -1 where ignored, on the logits' device
  Tensor column;  // [V] f32, 0..V-1, on the logits' device
  std::vector<float> host_target;
  int64_t count = 0;
};

// The targets checked as ops::cross_entropy checks them, as floats.
Rows row_inputs(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const char* op) {
  LT_CHECK(logits.dim() == 2, op, ": logits must be [N, V], got ", logits.str());
  LT_CHECK(targets.shape() == (Shape{logits.size(0)}) &&
               (targets.dtype() == DType::I32 || targets.dtype() == DType::I64),
           op, ": targets must be i32 or i64 of [", logits.size(0), "], got ", targets.str());
  const int64_t n = logits.size(0), v = logits.size(1);
  LT_CHECK(v < (int64_t{1} << 24), op, ": ", v, " classes do not fit an f32 index");
  Rows r;
  const Tensor host = targets.to(Device::cpu()).to(DType::I64).contiguous();
  std::vector<float> target(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = host.data<int64_t>()[i];
    if (t == ignore_index) {
      target[static_cast<size_t>(i)] = -1.0f;
    } else {
      LT_CHECK(t >= 0 && t < v, op, ": target ", t, " at row ", i,
               " is outside the vocabulary [0, ", v, ") and is not ignore_index (", ignore_index,
               ")");
      target[static_cast<size_t>(i)] = static_cast<float>(t);
      ++r.count;
    }
  }
  std::vector<float> column(static_cast<size_t>(v));
  for (int64_t j = 0; j < v; ++j) column[static_cast<size_t>(j)] = static_cast<float>(j);
  r.target = Tensor::from_vector(target, {n}).to(logits.device());
  r.host_target = std::move(target);
  r.column = Tensor::from_vector(column, {v}).to(logits.device());
  return r;
}

}  // namespace

KernelGraph cross_entropy_forward_graph(DType dtype) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, dtype);
  const Value target = g.input(ShapeClass::Row, DType::F32);
  const Value column = g.input(ShapeClass::Col, DType::F32);
  const Value max = g.row_max(x);
  const Value lse = g.add(max, g.log(g.row_sum(g.exp(g.sub(x, max)))));
  const Value zero = g.constant(0.0);
  // A select, not a product with the one-hot: a -inf logit elsewhere in
  // the row must not make the sum NaN.
  const Value target_logit = g.row_sum(g.select(is_target(g, column, target), x, zero));
  const Value counted = counts(g, target);
  g.output(g.select(counted, lse, zero), DType::F32);
  g.output(g.select(counted, g.sub(lse, target_logit), zero), DType::F32);
  return g;
}

KernelGraph cross_entropy_backward_graph(DType dtype) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, dtype);
  const Value lse = g.input(ShapeClass::Row, DType::F32);
  const Value target = g.input(ShapeClass::Row, DType::F32);
  const Value scale = g.input(ShapeClass::Row, DType::F32);
  const Value column = g.input(ShapeClass::Col, DType::F32);
  const Value softmax = g.exp(g.sub(x, lse));
  g.output(g.mul(g.sub(softmax, is_target(g, column, target)), scale), dtype);
  return g;
}

ops::CrossEntropyOutput compiled_cross_entropy(KernelCache& cache, const Tensor& logits,
                                               const Tensor& targets, int64_t ignore_index) {
  const Rows rows = row_inputs(logits, targets, ignore_index, "compiled_cross_entropy");
  const KernelGraph graph = cross_entropy_forward_graph(logits.dtype());
  const DeviceKernel kernel = kernel_for(cache, graph, logits.device());
  const std::vector<Tensor> out =
      call(kernel, graph, {logits.contiguous(), rows.target, rows.column});
  // The rows' losses summed in order in double, as ops does.
  const std::vector<double> losses = out[1].to(Device::cpu()).to_doubles();
  double total = 0;
  for (double l : losses) total += l;
  ops::CrossEntropyOutput result;
  result.count = rows.count;
  result.lse = out[0];
  result.loss =
      Tensor::scalar(rows.count > 0 ? total / static_cast<double>(rows.count) : 0.0, DType::F32)
          .to(logits.device());
  return result;
}

namespace {

// The backward into `out` (undefined: a new tensor), which may be the
// logits themselves (compile/tensor_call.h: written in place).
Tensor backward_into(KernelCache& cache, double grad_loss, const Tensor& logits,
                     const Tensor& targets, const Tensor& lse, int64_t ignore_index, int64_t count,
                     const Tensor& out) {
  const Rows rows = row_inputs(logits, targets, ignore_index, "compiled_cross_entropy_backward");
  LT_CHECK(lse.shape() == (Shape{logits.size(0)}), "compiled_cross_entropy_backward: lse ",
           lse.str(), " for logits ", logits.str());
  const double per_row = count > 0 ? grad_loss / static_cast<double>(count) : 0.0;
  // The scale per row: 0 where ignored, so those rows' gradients are 0.
  std::vector<float> scales;
  for (float t : rows.host_target) scales.push_back(t >= 0 ? static_cast<float>(per_row) : 0.0f);
  const Tensor scale = Tensor::from_vector(scales, {logits.size(0)}).to(logits.device());
  const KernelGraph graph = cross_entropy_backward_graph(logits.dtype());
  const DeviceKernel kernel = kernel_for(cache, graph, logits.device());
  return call(
      kernel, graph,
      {logits.contiguous(), lse.to(DType::F32).contiguous(), rows.target, scale, rows.column},
      {out})[0];
}

}  // namespace

Tensor compiled_cross_entropy_backward(KernelCache& cache, double grad_loss, const Tensor& logits,
                                       const Tensor& targets, const Tensor& lse,
                                       int64_t ignore_index, int64_t count) {
  return backward_into(cache, grad_loss, logits, targets, lse, ignore_index, count, Tensor());
}

void compiled_cross_entropy_backward_(KernelCache& cache, double grad_loss, const Tensor& logits,
                                      const Tensor& targets, const Tensor& lse,
                                      int64_t ignore_index, int64_t count) {
  LT_CHECK(logits.is_contiguous(), "compiled_cross_entropy_backward_: the logits ", logits.str(),
           " must be contiguous to take their gradient in place");
  backward_into(cache, grad_loss, logits, targets, lse, ignore_index, count, logits);
}

}  // namespace lt::compile
