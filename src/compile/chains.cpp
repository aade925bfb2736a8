#include "compile/chains.h"

namespace lt::compile {

KernelGraph swiglu_forward(DType dtype) {
  KernelGraph g;
  const Value gate = g.input(ShapeClass::Full, dtype);
  const Value up = g.input(ShapeClass::Full, dtype);
  g.output(g.mul(g.mul(gate, g.sigmoid(gate)), up), dtype);
  return g;
}

KernelGraph gelu_tanh_forward(DType dtype) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, dtype);
  const Value cubic = g.add(x, g.mul(g.constant(0.044715), g.mul(x, g.mul(x, x))));
  const Value inner = g.mul(g.constant(0.7978845608028654), cubic);  // sqrt(2/pi)
  g.output(g.mul(g.mul(g.constant(0.5), x), g.add(g.constant(1.0), g.tanh(inner))), dtype);
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
