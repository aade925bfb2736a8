#pragma once
// Float64 sums of squared gradients: the outside reference the gradient
// norm tests compare against (read on the host, one element at a time).
#include "core/tensor.h"
#include "nn/module.h"

namespace lt::testing {

// The sum of x^2 over `g` (any device, any float dtype), in float64.
inline double squares_f64(const Tensor& g) {
  double s = 0;
  for (double x : g.to(Device::cpu()).to_doubles()) s += x * x;
  return s;
}

// The same over every defined gradient of `params`.
inline double grad_squares_f64(const nn::NamedParameters& params) {
  double s = 0;
  for (const auto& [name, p] : params)
    if (p.grad().defined()) s += squares_f64(p.grad());
  return s;
}

}  // namespace lt::testing
