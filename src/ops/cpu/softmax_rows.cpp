#include "ops/cpu/softmax_rows.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "ops/cpu/fast_exp.h"

namespace lt::ops::cpu {

namespace {

// Generic over the vector type F (with its int32 twin I); each instance is
// inlined into a function compiled for one ISA below.
template <typename F, typename I>
[[gnu::always_inline]] inline float max_t(const float* x, int64_t n) {
  constexpr int64_t W = sizeof(F) / sizeof(float);
  float m = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  if (n >= W) {
    F acc = F{} + m;
    for (; j + W <= n; j += W) {
      F v;
      __builtin_memcpy(&v, x + j, sizeof v);
      acc = v > acc ? v : acc;  // a NaN compares false: acc stays
    }
    for (int64_t k = 0; k < W; ++k) m = std::max(m, acc[k]);
  }
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

template <typename F, typename I>
[[gnu::always_inline]] inline double sum_exp_shifted_t(const float* x, float shift, int64_t n) {
  constexpr int64_t W = sizeof(F) / sizeof(float);
  constexpr int64_t kBlock = 1024;  // f32 partial sums stay exact enough
  double total = 0;
  int64_t j = 0;
  while (j + W <= n) {
    F acc{};
    const int64_t block_end = std::min(n, j + kBlock);  // at least j + W
    for (; j + W <= block_end; j += W) {
      F v;
      __builtin_memcpy(&v, x + j, sizeof v);
      acc += fast_expv<F, I>(v - shift);
    }
    for (int64_t k = 0; k < W; ++k) total += acc[k];
  }
  for (; j < n; ++j) total += fast_expf(x[j] - shift);
  return total;
}

template <typename F, typename I>
[[gnu::always_inline]] inline void exp_shifted_scaled_t(const float* x, float shift, float scale,
                                                        float* out, int64_t n) {
  constexpr int64_t W = sizeof(F) / sizeof(float);
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    F v;
    __builtin_memcpy(&v, x + j, sizeof v);
    const F e = fast_expv<F, I>(v - shift) * scale;
    __builtin_memcpy(out + j, &e, sizeof e);
  }
  for (; j < n; ++j) out[j] = fast_expf(x[j] - shift) * scale;
}

using Float16 = float __attribute__((vector_size(64)));
using Int16 = int32_t __attribute__((vector_size(64)));

// One set of three functions per ISA, each compiled for it.
#define LT_ROW_KERNELS(suffix, target, F, I)                                            \
  target float max_##suffix(const float* x, int64_t n) {                                \
    return max_t<F, I>(x, n);                                                           \
  }                                                                                     \
  target double sum_exp_##suffix(const float* x, float shift, int64_t n) {              \
    return sum_exp_shifted_t<F, I>(x, shift, n);                                        \
  }                                                                                     \
  target void exp_scaled_##suffix(const float* x, float shift, float scale, float* out, \
                                  int64_t n) {                                          \
    exp_shifted_scaled_t<F, I>(x, shift, scale, out, n);                                \
  }                                                                                     \
  const RowKernels kKernels_##suffix = {max_##suffix, sum_exp_##suffix, exp_scaled_##suffix};

LT_ROW_KERNELS(baseline, , Float8, Int8)
#if defined(__x86_64__) && defined(__GNUC__)
LT_ROW_KERNELS(avx2, __attribute__((target("avx2,fma"))), Float8, Int8)
LT_ROW_KERNELS(avx512, __attribute__((target("avx512f"))), Float16, Int16)
#endif
#undef LT_ROW_KERNELS

}  // namespace

bool row_isa_supported(RowIsa isa) {
  switch (isa) {
    case RowIsa::kBaseline:
      return true;
#if defined(__x86_64__) && defined(__GNUC__)
    case RowIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case RowIsa::kAvx512:
      return __builtin_cpu_supports("avx512f");
#else
    default:
      return false;
#endif
  }
  return false;
}

RowIsa best_row_isa() {
  if (row_isa_supported(RowIsa::kAvx512)) return RowIsa::kAvx512;
  if (row_isa_supported(RowIsa::kAvx2)) return RowIsa::kAvx2;
  return RowIsa::kBaseline;
}

const RowKernels& row_kernels(RowIsa isa) {
  LT_CHECK(row_isa_supported(isa), "row_kernels: this CPU lacks the instruction set asked for");
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == RowIsa::kAvx512) return kKernels_avx512;
  if (isa == RowIsa::kAvx2) return kKernels_avx2;
#endif
  return kKernels_baseline;
}

const RowKernels& row_kernels() {
  static const RowKernels& best = row_kernels(best_row_isa());
  return best;
}

}  // namespace lt::ops::cpu
