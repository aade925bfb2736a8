#include "compile/chains.h"

namespace lt::compile {

KernelGraph swiglu_forward(DType dtype) {
  KernelGraph g;
  const Value gate = g.input(ShapeClass::Full, dtype);
  const Value up = g.input(ShapeClass::Full, dtype);
  g.output(g.mul(g.mul(gate, g.sigmoid(gate)), up), dtype);
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

}  // namespace lt::compile
