#pragma once
// The f32 row loops of the CPU cross-entropy (a row's max, its sum of
// exp(x - shift), and exp(x - shift) * scale), in three builds chosen at
// run time by what the CPU has: the x86-64 baseline (SSE), AVX2 with FMA,
// and AVX-512. The demo model's 50k-entry rows made these loops a third of
// a CPU training step at the baseline. The three agree to rounding (the
// lanes sum in another order, and FMA rounds once where SSE rounds twice).
#include <cstdint>

namespace lt::ops::cpu {

enum class RowIsa { kBaseline, kAvx2, kAvx512 };

bool row_isa_supported(RowIsa isa);
RowIsa best_row_isa();  // the widest this CPU supports

struct RowKernels {
  // max_j x[j], ignoring NaNs (as std::max(m, x) folds them away); -inf
  // for n = 0.
  float (*max)(const float* x, int64_t n);
  // sum_j exp(x[j] - shift), accumulated in f32 lanes per block of 1024
  // and in double across blocks.
  double (*sum_exp_shifted)(const float* x, float shift, int64_t n);
  // out[j] = exp(x[j] - shift) * scale.
  void (*exp_shifted_scaled)(const float* x, float shift, float scale, float* out, int64_t n);
};

// The kernels for `isa` (which must be supported).
const RowKernels& row_kernels(RowIsa isa);
// The kernels for best_row_isa(), chosen once.
const RowKernels& row_kernels();

}  // namespace lt::ops::cpu
