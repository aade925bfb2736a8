#pragma once
// Finite-difference gradient checks in float64, and closeness helpers.
// Every differentiable op is checked against central differences of its own
// forward: the analytic vector-Jacobian product w^T J (from backward) must
// match (f(x + eps e_j) - f(x - eps e_j)) . w / (2 eps) for every j.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace lt::testing {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-7;
  double rtol = 1e-5;
  uint64_t seed = 1234;  // for the random output weights w
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

// `inputs` that are f64 are made leaves requiring grad and checked; other
// inputs (integer ids, say) are passed through unchanged.
::testing::AssertionResult gradcheck(const TensorFn& f, std::vector<Tensor> inputs,
                                     const GradcheckOptions& options = {});

// Element-wise |actual - expected| <= atol + rtol |expected|, naming the
// first few offending indices.
::testing::AssertionResult all_close(const std::vector<double>& actual,
                                     const std::vector<double>& expected, double atol, double rtol);
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol,
                                     double rtol);

// ||a - b|| / ||b|| over all elements (the tolerance form used for bf16).
double relative_error_norm(const std::vector<double>& actual, const std::vector<double>& expected);

Tensor randn64(const Shape& shape, Generator& gen, double stddev = 1.0);

}  // namespace lt::testing
