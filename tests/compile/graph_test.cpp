// The IR, its float64 interpreter and its MLIR text, without running MLIR
// (these run in a build without it too).
#include <gtest/gtest.h>

#include <cmath>

#include "compile/graph.h"
#include "compile/interpret.h"
#include "compile/to_mlir.h"
#include "core/dtype.h"
#include "core/error.h"

namespace lt::compile {
namespace {

KernelGraph softmax_graph(DType stored) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, DType::F32);
  const Value e = g.exp(g.sub(x, g.row_max(x)));
  g.output(g.div(e, g.row_sum(e)), stored);
  return g;
}

TEST(KernelGraphInterpreter, SoftmaxEqualsTheFormula) {
  const int64_t rows = 2, cols = 5;
  const Values x = {0.5, -1, 2, 3, 0, 10, 10, 9, -4, 0.25};
  const Reference ref = interpret(softmax_graph(DType::F32), rows, cols, {x});
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) {
      const double want = static_cast<float>(std::exp(x[r * cols + c]) / sum);
      EXPECT_DOUBLE_EQ(ref.outputs[0][r * cols + c], want);
    }
  }
}

TEST(KernelGraphInterpreter, BroadcastsRowsAndColumns) {
  KernelGraph g;
  const Value row = g.input(ShapeClass::Row, DType::F32);
  const Value col = g.input(ShapeClass::Col, DType::F32);
  g.output(g.sub(row, col), DType::F32);
  g.output(g.mul(row, g.cols()), DType::F32);
  const Reference ref = interpret(g, 2, 3, {{10, 20}, {1, 2, 3}});
  EXPECT_EQ(ref.outputs[0], (Values{9, 8, 7, 19, 18, 17}));
  EXPECT_EQ(ref.outputs[1], (Values{30, 60}));
}

// IEEE binary16: 11 significant bits, 65504 the largest value, subnormals
// 2^-24 apart below 2^-14. The interpreter's f16 against those facts and
// against core's f32 -> f16 conversion (the CPU kernels' storage).
TEST(KernelGraphInterpreter, CastToF16RoundsToNearestEvenWithSubnormalsAndInfinity) {
  EXPECT_EQ(round_to_f16(1.0 + 0x1.0p-11), 1.0);                 // a tie: to even
  EXPECT_EQ(round_to_f16(1.0 + 3 * 0x1.0p-11), 1.0 + 0x1.0p-9);  // a tie: to even, up
  EXPECT_EQ(round_to_f16(65504.0), 65504.0);
  EXPECT_EQ(round_to_f16(65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(round_to_f16(65520.0)));
  EXPECT_EQ(round_to_f16(-0x1.0p-24), -0x1.0p-24);  // the smallest subnormal
  EXPECT_EQ(round_to_f16(0x1.0p-25), 0.0);          // a tie: to even, 0
  EXPECT_EQ(round_to_f16(3 * 0x1.0p-25), 0x1.0p-23);
  EXPECT_EQ(round_to_f16(0x1.8p-20), 0x1.8p-20);  // subnormal, exact
  for (double x : {0.1, -1.7, 3.14159, 1e-5, 7e-8, 60000.0, -2049.0}) {
    EXPECT_EQ(round_to_f16(x), f16_to_f32(f32_to_f16(static_cast<float>(x)))) << x;
  }
  KernelGraph g;
  g.output(g.cast(g.input(ShapeClass::Full, DType::F32), DType::F16), DType::F32);
  const Reference ref = interpret(g, 1, 1, {{1.0 + 0x1.0p-11 + 0x1.0p-20}});
  EXPECT_EQ(ref.outputs[0][0], 1.0 + 0x1.0p-10);
}

TEST(KernelGraphInterpreter, CastToBf16RoundsToNearestEven) {
  EXPECT_EQ(round_to_bf16(1.0 + 0x1.0p-8), 1.0);                 // a tie: to even
  EXPECT_EQ(round_to_bf16(1.0 + 3 * 0x1.0p-8), 1.0 + 0x1.0p-6);  // a tie: to even, up
  EXPECT_EQ(round_to_bf16(1.0 + 0x1.0p-8 + 0x1.0p-20), 1.0 + 0x1.0p-7);
  EXPECT_EQ(round_to_bf16(-3.0), -3.0);
  KernelGraph g;
  g.output(g.cast(g.input(ShapeClass::Full, DType::F32), DType::BF16), DType::F32);
  const Reference ref = interpret(g, 1, 1, {{1.0 + 0x1.0p-8 + 0x1.0p-20}});
  EXPECT_EQ(ref.outputs[0][0], 1.0 + 0x1.0p-7);
}

TEST(KernelGraph, KeySeparatesDtypesShapesAndConstants) {
  EXPECT_EQ(softmax_graph(DType::F32).key(), softmax_graph(DType::F32).key());
  EXPECT_NE(softmax_graph(DType::F32).key(), softmax_graph(DType::BF16).key());
  auto scaled = [](ShapeClass shape, double c) {
    KernelGraph g;
    g.output(g.mul(g.input(shape, DType::F32), g.constant(c)), DType::F32);
    return g.key();
  };
  EXPECT_NE(scaled(ShapeClass::Full, 0.1), scaled(ShapeClass::Row, 0.1));
  EXPECT_NE(scaled(ShapeClass::Full, 0.1), scaled(ShapeClass::Full, 0.1 + 1e-17));
}

TEST(KernelGraph, RefusesWhatItCannotCompile) {
  KernelGraph g;
  const Value row = g.input(ShapeClass::Row, DType::F32);
  const Value col = g.input(ShapeClass::Col, DType::F32);
  EXPECT_THROW(g.row_sum(row), Error);
  EXPECT_THROW(g.output(col, DType::F32), Error);
  EXPECT_THROW(g.output(row, DType::F64), Error);
  EXPECT_THROW(g.input(ShapeClass::Full, DType::I32), Error);
  EXPECT_THROW(g.cast(row, DType::I8), Error);  // codes are storage, not a cast
  EXPECT_THROW(g.add(row, Value{99}), Error);
  try {
    g.row_max(row);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row_max reduces a full value"), std::string::npos);
  }
}

// A col sum: the column's values added over the rows, in float64, and an
// output only (f32, read by nothing, beside no output written in place).
TEST(KernelGraphColSum, InterpreterSumsEachColumnOverTheRows) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, DType::F32);
  const Value w = g.input(ShapeClass::Col, DType::F32);
  g.output(g.col_sum(g.mul(x, w)), DType::F32);
  EXPECT_TRUE(g.has_col_sums());
  const Values in = {1, 2, 3, 4, 5, 6}, weight = {0.5, -1, 2};
  const Reference ref = interpret(g, 2, 3, {in, weight});
  EXPECT_EQ(ref.outputs[0], (Values{(1 + 4) * 0.5, (2 + 5) * -1.0, (3 + 6) * 2.0}));
  // No rows: zeros.
  EXPECT_EQ(interpret(g, 0, 3, {{}, weight}).outputs[0], (Values{0, 0, 0}));
  EXPECT_NE(g.key().find("col_sum"), std::string::npos);
}

TEST(KernelGraphColSum, IsAnF32OutputOnly) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, DType::F32);
  const Value col = g.input(ShapeClass::Col, DType::F32);
  EXPECT_THROW(g.col_sum(col), Error);           // sums a full value
  EXPECT_THROW(g.row_sum(g.col_sum(x)), Error);  // read by another op
  EXPECT_THROW(g.add(x, g.col_sum(x)), Error);
  EXPECT_THROW(g.output(g.col_sum(x), DType::BF16), Error);  // stored as f32
  EXPECT_THROW(g.output(col, DType::F32), Error);            // a col output is a col_sum
  EXPECT_FALSE(g.has_col_sums());
  KernelGraph in_place;
  const Value y = in_place.input(ShapeClass::Full, DType::F32);
  in_place.output(in_place.col_sum(y), DType::F32);
  EXPECT_THROW(in_place.output_over(in_place.exp(y), y), Error);
  KernelGraph over_first;
  const Value z = over_first.input(ShapeClass::Full, DType::F32);
  over_first.output_over(over_first.exp(z), z);
  EXPECT_THROW(over_first.output(over_first.col_sum(z), DType::F32), Error);
}

TEST(KernelGraphMlir, SoftmaxRunsAsTwoReductionPassesAndOneOutputPass) {
  const std::string mlir = to_mlir(softmax_graph(DType::BF16), "softmax");
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = mlir.find(what); at != std::string::npos; at = mlir.find(what, at + 1)) ++n;
    return n;
  };
  // Each reduction pass a loop nest whose accumulator is an iter_arg (in
  // registers), the output pass one generic.
  EXPECT_EQ(count("linalg.generic"), 1u) << mlir;
  EXPECT_EQ(count("iter_args("), 2u) << mlir;
  EXPECT_EQ(count("memref.alloc"), 2u) << mlir;
  EXPECT_EQ(count("memref.dealloc"), 2u) << mlir;
  EXPECT_NE(mlir.find("%out0: memref<?x?xbf16>"), std::string::npos) << mlir;
}

}  // namespace
}  // namespace lt::compile
