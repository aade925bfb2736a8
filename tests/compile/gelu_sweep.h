#pragma once
// The GELU accuracy sweep, shared by the CPU test
// (tests/compile/gelu_accuracy_test.cpp) and the GPU one
// (tests/gpu/gelu_accuracy_gpu_test.cpp), whose lowerings differ (libm's
// expf and a division; PTX's ex2.approx and rcp.approx): compile/chains.h's
// GELU forward and its gradient graphs, at every bf16 value and at 2^20
// f32 points over [-12, 12] with the extremes, against the float64
// interpreter within its rounding bound (compile/interpret.h); and the
// interpreter's float64 values against GPT-2's formula written out
// (0.5 x (1 + tanh(u)), ops/activations.h), so that the graph is the right
// function.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "compile/chains.h"
#include "compile/gradient.h"
#include "compile/interpret.h"
#include "core/dtype.h"

namespace lt::compile::testing {

struct GeluCase {
  std::string name;
  KernelGraph graph;
  bool backward = false;  // inputs x, then the output's gradient (all 1)
  DType x_dtype = DType::BF16;
};

// The forward and backward graphs in bf16 (the backward with f32
// gradients, and with bf16 ones as training stores them) and in f32.
inline std::vector<GeluCase> gelu_cases() {
  const KernelGraph bf16 = gelu_tanh_forward(DType::BF16);
  const KernelGraph f32 = gelu_tanh_forward(DType::F32);
  return {{"forward bf16", bf16, false, DType::BF16},
          {"backward bf16, f32 gradients", gradient_graph(bf16, {true}), true, DType::BF16},
          {"backward bf16, bf16 gradients",
           gradient_graph(bf16, {true}, GradientStorage::AsTheForward), true, DType::BF16},
          {"forward f32", f32, false, DType::F32},
          {"backward f32", gradient_graph(f32, {true}), true, DType::F32}};
}

// Each sweep is chunks of kGeluRows x kGeluCols (a multiple of 8 columns:
// the GPU's packed form takes its vector path).
inline constexpr int64_t kGeluRows = 64, kGeluCols = 1024;
inline constexpr int64_t kGeluChunk = kGeluRows * kGeluCols;

// bf16: all 65,536 bit patterns (infinities, NaNs, subnormals, zeros).
// f32: 2^20 - 64 evenly spaced points over [-12, 12], then 64 extremes.
inline Values gelu_sweep(DType dtype) {
  Values x;
  if (dtype == DType::BF16) {
    for (uint32_t bits = 0; bits < 65536; ++bits)
      x.push_back(bf16_to_f32(static_cast<uint16_t>(bits)));
    return x;
  }
  const int64_t even = (int64_t{1} << 20) - 64;
  for (int64_t i = 0; i < even; ++i) {
    x.push_back(
        static_cast<float>(-12.0 + 24.0 * static_cast<double>(i) / static_cast<double>(even - 1)));
  }
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> magnitudes = {
      0.0,        0x1.0p-149,
      0x1.0p-126, 1e-30,
      1e-10,      1e-4,
      0.5,        1.0,
      3.0,        5.5,
      8.0,        9.0,
      10.0,       15.0,
      20.0,       30.0,
      50.0,       100.0,
      1e3,        1e4,
      1e10,       1e19,
      1e20,       1e30,
      3.4e38,     static_cast<double>(std::numeric_limits<float>::max()),
      inf};
  for (double m : magnitudes) {
    x.push_back(static_cast<float>(m));
    x.push_back(-static_cast<float>(m));
  }
  while (static_cast<int64_t>(x.size()) < (int64_t{1} << 20)) {
    x.push_back(std::numeric_limits<double>::quiet_NaN());
  }
  return x;
}

// GPT-2's gelu_new and its derivative as ops/activations.h writes them, in
// long double: an outside reference for the graph's float64 values, where
// 1 + tanh(u) keeps its digits (u above -9: x above about -5.7).
inline long double gelu_tanh_formula(long double x, bool derivative) {
  const long double c = 0.044715L, k = 0.79788456080286535587989211986876L;  // sqrt(2/pi)
  const long double t = std::tanh(k * (x + c * x * x * x));
  if (!derivative) return 0.5L * x * (1 + t);
  return 0.5L * (1 + t) + 0.5L * x * (1 - t * t) * k * (1 + 3 * c * x * x);
}

// Runs `graph` on [rows, cols] of `inputs` (stored values, as doubles) and
// returns its outputs as doubles: the CPU JIT's kernel or the GPU's.
using RunGelu = std::function<std::vector<Values>(const KernelGraph& graph, int64_t rows,
                                                  int64_t cols, const std::vector<Values>& inputs)>;

// For the report: the worst |kernel - float64| over the interpreter's
// bound (times kBoundSlack it is the tolerance) where the float64 value is
// above 2^-100, clear of f32's underflow (where the bound is the whole
// value by design).
struct GeluSweepResult {
  int64_t checked = 0, wrong = 0;
  int64_t formula_checked = 0, formula_wrong = 0;  // x in [-5.5, 12]: the graph against the formula
  double worst_ratio = 0;                          // of |kernel - float64| to the unscaled bound
  double worst_at = 0;
  int64_t not_nearest_bf16 = 0;  // bf16 outputs not the nearest bf16 of the float64 value
};

// Where the reference is NaN or infinite, the kernel's value must be the
// same; elsewhere within kBoundSlack times the bound, plus the output
// type's smallest subnormal (the bound is first order in relative
// roundings, and gradual underflow's are absolute). Fails the test with
// the first few elements off.
inline GeluSweepResult expect_gelu_within_bound(const GeluCase& c, const RunGelu& run) {
  constexpr double u = 0x1.0p-24;
  const Values sweep = gelu_sweep(c.x_dtype);
  const DType out_dtype = c.graph.outputs().at(0).dtype;
  const double smallest = out_dtype == DType::BF16 ? 0x1.0p-133 : 0x1.0p-149;
  GeluSweepResult result;
  for (size_t at = 0; at < sweep.size(); at += static_cast<size_t>(kGeluChunk)) {
    std::vector<Values> inputs = {
        Values(sweep.begin() + static_cast<std::ptrdiff_t>(at),
               sweep.begin() + static_cast<std::ptrdiff_t>(at) + kGeluChunk)};
    if (c.backward) inputs.push_back(Values(static_cast<size_t>(kGeluChunk), 1.0));
    const Reference ref = interpret(c.graph, kGeluRows, kGeluCols, inputs);
    const std::vector<Values> got = run(c.graph, kGeluRows, kGeluCols, inputs);
    EXPECT_EQ(got.size(), 1u) << c.name;
    if (got.size() != 1u) return result;
    for (size_t i = 0; i < got[0].size(); ++i) {
      const double x = inputs[0][i], want = ref.outputs[0][i], kernel = got[0][i];
      ++result.checked;
      bool ok = false;
      if (std::isnan(want) || std::isinf(want)) {
        ok = std::isnan(want) ? std::isnan(kernel) : kernel == want;
      } else {
        const double error = std::abs(kernel - want);
        const double bound = ref.rounding_bound[0][i];
        ok = error <= kBoundSlack * u * bound + smallest;
        if (std::abs(want) > 0x1.0p-100 && error / (u * bound) > result.worst_ratio) {
          result.worst_ratio = error / (u * bound);
          result.worst_at = x;
        }
        if (out_dtype == DType::BF16 && kernel != round_to_bf16(ref.exact[0][i])) {
          ++result.not_nearest_bf16;
        }
        if (x >= -5.5 && x <= 12) {
          const long double formula = gelu_tanh_formula(x, c.backward);
          const long double exact = ref.exact[0][i];
          ++result.formula_checked;
          if (std::abs(exact - formula) > 1e-9L * std::max(1.0L, std::abs(formula)) &&
              ++result.formula_wrong <= 3) {
            ADD_FAILURE() << c.name << ": at x = " << x << " the graph's float64 value "
                          << static_cast<double>(exact) << " is not GPT-2's gelu_new's "
                          << static_cast<double>(formula);
          }
        }
      }
      if (!ok && ++result.wrong <= 5) {
        std::ostringstream where;
        where.precision(9);
        where << c.name << ": x = " << x << ": kernel " << kernel << ", float64 " << want
              << ", bound " << kBoundSlack * u * ref.rounding_bound[0][i];
        ADD_FAILURE() << where.str();
      }
    }
  }
  EXPECT_EQ(result.wrong, 0) << c.name << ": elements off of " << result.checked;
  EXPECT_EQ(result.formula_wrong, 0) << c.name << ": of " << result.formula_checked;
  return result;
}

}  // namespace lt::compile::testing
