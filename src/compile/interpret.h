#pragma once
// The float64 reference for compiled kernels: runs a KernelGraph element
// by element in double, rounding only where the graph says (a Cast to
// bf16, an output stored as bf16 or f32). The compiled kernel computes in
// f32, so it may differ from this by the rounding of each f32 operation;
// `rounding_bound` says by how much at most (first-order error analysis),
// which is what tests accept as the tolerance.
#include <cstdint>
#include <vector>

#include "compile/graph.h"

namespace lt::compile {

// Values of one shape class, row-major: Full rows*cols, Row rows, Col cols,
// Scalar 1.
using Values = std::vector<double>;

int64_t element_count(ShapeClass shape, int64_t rows, int64_t cols);
// The values an input's buffer holds: element_count, or for a mapped Full
// input the span its RowMap reads (mapped_span).
int64_t input_count(const InputSpec& input, int64_t rows, int64_t cols);

struct Reference {
  std::vector<Values> outputs;  // one per graph output, as stored (rounded)
  // Per output element: a bound on |f32 kernel - this| in units of the f32
  // unit roundoff (2^-24), to be taken times kBoundSlack. Counts each f32
  // rounding, libm's (as 2 ulp) and first-order propagation of earlier
  // errors (products of two errors are what the slack covers). A rounding
  // to bf16 (a Cast, a bf16 output) adds nothing where the value is
  // farther from a bf16 rounding boundary than its error, since both sides
  // then round alike; nearer, it adds one bf16 ulp, as either side may
  // round the other way. So a missing or wrong bf16 rounding shows where
  // the value is known well enough.
  std::vector<Values> rounding_bound;
  // The outputs before the rounding to their stored dtype (what finite
  // differences of the graph's math need).
  std::vector<Values> exact;
};
inline constexpr double kBoundSlack = 8.0;

// `inputs` in the order of graph.inputs(), each with input_count values
// (a mapped input's buffer as the kernel reads it). The outputs are dense
// [rows, cols], whatever their pitch.
Reference interpret(const KernelGraph& graph, int64_t rows, int64_t cols,
                    const std::vector<Values>& inputs);

// Rounds to the nearest bf16 value (ties to even), straight from double.
double round_to_bf16(double x);
// Rounds to the nearest f16 value (ties to even; subnormals below 2^-14,
// 2^-24 apart; inf from 65520 on).
double round_to_f16(double x);

}  // namespace lt::compile
