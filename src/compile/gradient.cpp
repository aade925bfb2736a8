#include "compile/gradient.h"

#include <optional>

#include "core/error.h"

namespace lt::compile {
namespace {

class Differentiator {
 public:
  Differentiator(const KernelGraph& forward, GradientStorage storage)
      : forward_(forward),
        as_the_forward_(storage == GradientStorage::AsTheForward),
        value_(forward.nodes().size()),
        grad_(forward.nodes().size()) {}

  KernelGraph run(const std::vector<bool>& needs_grad) {
    LT_CHECK(needs_grad.size() == forward_.inputs().size(),
             "compile: gradient_graph: ", needs_grad.size(), " needs_grad flags for ",
             forward_.inputs().size(), " inputs");
    // The forward, recomputed: the same nodes in the same order.
    for (size_t id = 0; id < forward_.nodes().size(); ++id) value_[id] = copy(forward_.nodes()[id]);
    // An output's gradient is read as the output was written (its pitch).
    for (const OutputSpec& o : forward_.outputs()) {
      const ShapeClass shape = forward_.node(o.node).shape;
      const DType dtype = as_the_forward_ ? o.dtype : DType::F32;
      accumulate(o.node, o.pitch == 1 ? g_.input(shape, dtype)
                                      : g_.mapped_input(dtype, RowMap{.pitch = o.pitch}));
    }
    for (size_t i = forward_.nodes().size(); i-- > 0;) {
      if (grad_[i]) propagate(static_cast<int32_t>(i), *grad_[i]);
    }
    for (const Node& n : forward_.nodes()) {
      if (n.op != OpKind::Input || !needs_grad[static_cast<size_t>(n.input_index)]) continue;
      const int32_t id = input_node(n.input_index);
      const ShapeClass want = n.shape == ShapeClass::Row ? ShapeClass::Row : ShapeClass::Full;
      const DType stored = forward_.inputs()[static_cast<size_t>(n.input_index)].dtype;
      const bool own_dtype = as_the_forward_ && n.shape == ShapeClass::Full;
      // A pitched input's gradient is written pitched alike; a table read
      // once per row group would need a sum over its rows, which no chain asks.
      const RowMap& map = forward_.inputs()[static_cast<size_t>(n.input_index)].map;
      LT_CHECK(map.group == 1 && map.period == 0, "compile: gradient_graph: input ", n.input_index,
               " is read once per row group and has no gradient here");
      const Value grad =
          spread(grad_[static_cast<size_t>(id)], want, value_[static_cast<size_t>(id)]);
      if (n.shape == ShapeClass::Col) {  // the rows' contributions, summed in the kernel
        g_.output(g_.col_sum(grad), DType::F32);
        continue;
      }
      g_.output_pitched(grad, own_dtype ? stored : DType::F32, map.pitch);
    }
    return std::move(g_);
  }

 private:
  int32_t input_node(int32_t input_index) const {
    for (size_t id = 0; id < forward_.nodes().size(); ++id) {
      const Node& n = forward_.nodes()[id];
      if (n.op == OpKind::Input && n.input_index == input_index) return static_cast<int32_t>(id);
    }
    fail("compile: gradient_graph: no node for input ", input_index);
  }

  Value v(int32_t id) const { return value_[static_cast<size_t>(id)]; }

  Value copy(const Node& n) {
    if (n.op != OpKind::Input) {
      return g_.copy_op(forward_, n, [this](int32_t id) { return v(id); });
    }
    const RowMap& map = forward_.inputs()[static_cast<size_t>(n.input_index)].map;
    return map.identity() ? g_.input(n.shape, n.dtype) : g_.mapped_input(n.dtype, map);
  }

  // A gradient of class `want` (Full or Row) from one that may be narrower
  // (a Row gradient of a Full value, or none at all: zeros).
  Value spread(const std::optional<Value>& grad, ShapeClass want, Value like) {
    if (!grad) return g_.select(g_.constant(0.0), like, g_.constant(0.0));
    const ShapeClass have = g_.node(grad->id).shape;
    if (have == want) return *grad;
    LT_CHECK(want == ShapeClass::Full, "compile: gradient_graph: a ", shape_class_name(have),
             " gradient for a row value");
    return g_.select(g_.constant(1.0), *grad, like);
  }

  // Adds to the gradient of node `id`. A gradient wider than the node (a
  // row value broadcast over the columns) is summed back over the row; a
  // col value's stays per element until the col input's output sums it
  // over the rows (exact by linearity); constants take none.
  void accumulate(int32_t id, Value grad) {
    const ShapeClass target = forward_.node(id).shape;
    if (target == ShapeClass::Scalar) return;
    if (target == ShapeClass::Row && g_.node(grad.id).shape == ShapeClass::Full) {
      grad = g_.row_sum(grad);
    }
    std::optional<Value>& slot = grad_[static_cast<size_t>(id)];
    slot = slot ? g_.add(*slot, grad) : grad;
  }

  void propagate(int32_t id, Value g) {
    const Node& n = forward_.node(id);
    const Value y = v(id);
    switch (n.op) {
      case OpKind::Input:
      case OpKind::Constant:
      case OpKind::Cols:
      case OpKind::Less:
      case OpKind::Lookup:  // piecewise constant in its index
        return;
      case OpKind::Cast:
        accumulate(n.a, g);
        return;
      case OpKind::Add:
        accumulate(n.a, g);
        accumulate(n.b, g);
        return;
      case OpKind::Sub:
        accumulate(n.a, g);
        accumulate(n.b, g_.neg(g));
        return;
      case OpKind::Mul:
        accumulate(n.a, g_.mul(g, v(n.b)));
        accumulate(n.b, g_.mul(g, v(n.a)));
        return;
      case OpKind::Div:
        accumulate(n.a, g_.div(g, v(n.b)));
        accumulate(n.b, g_.neg(g_.div(g_.mul(g, y), v(n.b))));
        return;
      case OpKind::Max: {
        const Value a_smaller = g_.less(v(n.a), v(n.b));
        const Value zero = g_.constant(0.0);
        accumulate(n.a, g_.select(a_smaller, zero, g));
        accumulate(n.b, g_.select(a_smaller, g, zero));
        return;
      }
      case OpKind::Select: {
        const Value zero = g_.constant(0.0);
        accumulate(n.b, g_.select(v(n.a), g, zero));
        accumulate(n.c, g_.select(v(n.a), zero, g));
        return;
      }
      case OpKind::Neg:
        accumulate(n.a, g_.neg(g));
        return;
      case OpKind::Abs:
        accumulate(n.a, g_.select(g_.less(v(n.a), g_.constant(0.0)), g_.neg(g), g));
        return;
      case OpKind::Exp:
        accumulate(n.a, g_.mul(g, y));
        return;
      case OpKind::Log:
        accumulate(n.a, g_.div(g, v(n.a)));
        return;
      case OpKind::Tanh:
        accumulate(n.a, g_.mul(g, g_.sub(g_.constant(1.0), g_.mul(y, y))));
        return;
      case OpKind::Sqrt:
        accumulate(n.a, g_.div(g_.mul(g, g_.constant(0.5)), y));
        return;
      case OpKind::Rsqrt:  // d a^(-1/2) = -1/2 a^(-3/2) = -1/2 y^3
        accumulate(n.a, g_.mul(g_.mul(g, g_.constant(-0.5)), g_.mul(y, g_.mul(y, y))));
        return;
      case OpKind::Sigmoid:
        accumulate(n.a, g_.mul(g, g_.mul(y, g_.sub(g_.constant(1.0), y))));
        return;
      case OpKind::Erf: {
        const Value a = v(n.a);
        accumulate(n.a, g_.mul(g, g_.mul(g_.constant(1.1283791670955126),  // 2/sqrt(pi)
                                         g_.exp(g_.neg(g_.mul(a, a))))));
        return;
      }
      case OpKind::RowSum:
        accumulate(n.a, spread(g, ShapeClass::Full, v(n.a)));
        return;
      case OpKind::RowMax:
        // Every element equal to the maximum takes the row's gradient.
        accumulate(n.a, g_.select(g_.less(v(n.a), y), g_.constant(0.0), g));
        return;
      case OpKind::ColSum:  // each row takes the column's gradient
        accumulate(n.a, spread(g, ShapeClass::Full, v(n.a)));
        return;
    }
  }

  const KernelGraph& forward_;
  const bool as_the_forward_;
  KernelGraph g_;
  std::vector<Value> value_;
  std::vector<std::optional<Value>> grad_;
};

}  // namespace

KernelGraph gradient_graph(const KernelGraph& forward, const std::vector<bool>& needs_grad,
                           GradientStorage storage) {
  return Differentiator(forward, storage).run(needs_grad);
}

}  // namespace lt::compile
