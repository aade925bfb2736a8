#include "compile/chains.h"

namespace lt::compile {

KernelGraph swiglu_forward(DType dtype) {
  KernelGraph g;
  const Value gate = g.input(ShapeClass::Full, dtype);
  const Value up = g.input(ShapeClass::Full, dtype);
  g.output(g.mul(g.mul(gate, g.sigmoid(gate)), up), dtype);
  return g;
}

Value gelu_tanh(KernelGraph& g, Value x) {
  // 2 sqrt(2/pi) x + 2 sqrt(2/pi) 0.044715 x^3 as x (k + k c x^2): three
  // operations (a multiply, an FMA, a multiply), both terms of one sign.
  // x^2 is taken at most 1e4: from |x| = 100 on the sigmoid is 0 or 1 in
  // float64 already (|2u| > 7e4), and without the cap x^2 overflows f32
  // from 2^64 on, where the gradient's 0 * inf would be NaN.
  const double k = 2 * 0.7978845608028654;  // 2 sqrt(2/pi)
  const Value square = g.mul(x, x);
  const Value cap = g.constant(1e4);
  const Value capped = g.select(g.less(square, cap), square, cap);
  const Value scale = g.add(g.constant(k), g.mul(g.constant(k * 0.044715), capped));
  return g.mul(x, g.sigmoid(g.mul(x, scale)));
}

KernelGraph gelu_tanh_forward(DType dtype) {
  KernelGraph g;
  g.output(gelu_tanh(g, g.input(ShapeClass::Full, dtype)), dtype);
  return g;
}

KernelGraph softmax_forward(DType dtype) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, dtype);
  const Value e = g.exp(g.sub(x, g.row_max(x)));
  g.output(g.div(e, g.row_sum(e)), dtype);
  return g;
}

KernelGraph residual_rms_norm_forward(DType dtype, double eps) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, dtype);
  const Value residual = g.input(ShapeClass::Full, dtype);
  const Value weight = g.input(ShapeClass::Col, dtype);
  const Value h = g.cast(g.add(x, residual), dtype);
  const Value rstd = g.rsqrt(g.add(g.row_mean(g.mul(h, h)), g.constant(eps)));
  const Value normalized = g.cast(g.mul(h, rstd), dtype);
  g.output(h, dtype);
  g.output(g.mul(weight, normalized), dtype);
  g.output(rstd, DType::F32);
  return g;
}

KernelGraph layer_norm_forward(DType dtype, double eps) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, dtype);
  const Value weight = g.input(ShapeClass::Col, dtype);
  const Value bias = g.input(ShapeClass::Col, dtype);
  const Value centered = g.sub(x, g.row_mean(x));
  const Value rstd = g.rsqrt(g.add(g.row_mean(g.mul(centered, centered)), g.constant(eps)));
  g.output(g.add(g.mul(g.mul(centered, rstd), weight), bias), dtype);
  g.output(rstd, DType::F32);
  return g;
}

}  // namespace lt::compile
