#pragma once
// Float64 softmax cross-entropy: the outside reference the CPU and GPU
// cross-entropy tests compare against.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/random.h"

namespace lt::testing {

struct CrossEntropyRef {
  double loss = 0;
  std::vector<double> grad;  // d loss / d logits, for a loss gradient of 1
};

// Naive float64 over row-major [rows, V] logits: per row log(sum exp) -
// x[target], mean over the rows whose target is not `ignore`; the gradient
// (softmax - onehot) / count on those rows, zeros elsewhere.
inline CrossEntropyRef cross_entropy_f64(const std::vector<double>& x,
                                         const std::vector<int64_t>& targets, int64_t V,
                                         int64_t ignore) {
  CrossEntropyRef r;
  r.grad.assign(x.size(), 0.0);
  int64_t count = 0;
  for (int64_t t : targets) count += t != ignore;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] == ignore) continue;
    const double* row = x.data() + i * V;
    double m = row[0];
    for (int64_t j = 1; j < V; ++j) m = std::max(m, row[j]);
    double s = 0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(row[j] - m);
    const double lse = m + std::log(s);
    r.loss += (lse - row[targets[i]]) / count;
    for (int64_t j = 0; j < V; ++j) {
      r.grad[i * V + j] = (std::exp(row[j] - lse) - (j == targets[i] ? 1.0 : 0.0)) / count;
    }
  }
  return r;
}

// Random logits and targets for the cross-entropy tests: [n, v] values
// N(0, 3^2) (wide enough that the max shift matters) and targets uniform in
// [0, v), every `ignore_every`-th row (from row ignore_every - 1) `ignore`.
struct CrossEntropyCase {
  std::vector<float> logits;
  std::vector<int64_t> targets;
};
inline CrossEntropyCase random_cross_entropy_case(int64_t n, int64_t v, int64_t ignore_every,
                                                  int64_t ignore, uint64_t seed) {
  Generator gen(seed);
  CrossEntropyCase c;
  for (int64_t i = 0; i < n * v; ++i) c.logits.push_back(static_cast<float>(3.0 * gen.normal()));
  for (int64_t i = 0; i < n; ++i) {
    c.targets.push_back(i % ignore_every == ignore_every - 1
                            ? ignore
                            : static_cast<int64_t>(gen.below(static_cast<uint64_t>(v))));
  }
  return c;
}

}  // namespace lt::testing
