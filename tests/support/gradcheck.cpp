#include "support/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"

namespace lt::testing {

namespace {

double weighted_sum(const Tensor& y, const std::vector<double>& w) {
  std::vector<double> v = y.to_doubles();
  double acc = 0;
  for (size_t i = 0; i < v.size(); ++i) acc += v[i] * w[i];
  return acc;
}

}  // namespace

::testing::AssertionResult gradcheck(const TensorFn& f, std::vector<Tensor> inputs,
                                     const GradcheckOptions& o) {
  for (auto& t : inputs) {
    if (t.defined() && t.dtype() == DType::F64) {
      t = t.contiguous().detach();
      t.set_requires_grad(true);
    }
  }
  Tensor y = f(inputs);
  if (!y.requires_grad()) return ::testing::AssertionFailure() << "output does not require grad";
  Generator gen(o.seed);
  Tensor w = Tensor::randn(y.shape(), gen, y.dtype());
  std::vector<double> wv = w.to_doubles();
  backward(y, w);

  std::ostringstream failures;
  int bad = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& x = inputs[i];
    if (!x.defined() || x.dtype() != DType::F64) continue;
    std::vector<double> analytic(static_cast<size_t>(x.numel()), 0.0);
    if (x.grad().defined()) {
      if (x.grad().shape() != x.shape()) {
        return ::testing::AssertionFailure()
               << "input " << i << ": gradient shape " << shape_str(x.grad().shape()) << " vs "
               << shape_str(x.shape());
      }
      analytic = x.grad().to_doubles();
    }
    double* data = x.data<double>();
    NoGradGuard no_grad;
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double saved = data[j];
      data[j] = saved + o.eps;
      const double plus = weighted_sum(f(inputs), wv);
      data[j] = saved - o.eps;
      const double minus = weighted_sum(f(inputs), wv);
      data[j] = saved;
      const double numeric = (plus - minus) / (2 * o.eps);
      const double a = analytic[static_cast<size_t>(j)];
      if (!(std::abs(a - numeric) <= o.atol + o.rtol * std::abs(numeric))) {
        if (bad++ < 8) {
          failures << "\n  input " << i << " element " << j << ": analytic " << a << " numeric "
                   << numeric;
        }
      }
    }
  }
  if (bad) {
    return ::testing::AssertionFailure() << bad << " gradient entries differ" << failures.str();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const std::vector<double>& actual,
                                     const std::vector<double>& expected, double atol,
                                     double rtol) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << actual.size() << " vs " << expected.size();
  }
  std::ostringstream failures;
  int bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = actual[i], e = expected[i];
    bool ok = (std::isnan(a) && std::isnan(e)) || std::abs(a - e) <= atol + rtol * std::abs(e);
    if (!ok && bad++ < 8) failures << "\n  [" << i << "] actual " << a << " expected " << e;
  }
  if (bad) {
    return ::testing::AssertionFailure()
           << bad << " of " << actual.size() << " elements differ" << failures.str();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol,
                                     double rtol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shapes differ: " << shape_str(actual.shape()) << " vs "
                                         << shape_str(expected.shape());
  }
  return all_close(actual.to_doubles(), expected.to_doubles(), atol, rtol);
}

double relative_error_norm(const std::vector<double>& actual, const std::vector<double>& expected) {
  double num = 0, den = 0;
  for (size_t i = 0; i < actual.size() && i < expected.size(); ++i) {
    num += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    den += expected[i] * expected[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

Tensor randn64(const Shape& shape, Generator& gen, double stddev) {
  return Tensor::randn(shape, gen, DType::F64, stddev);
}

}  // namespace lt::testing
