// Outputs written over their inputs (KernelGraph::output_over): the key
// says which, what cannot be written in place is refused, and the CPU
// kernel writes the input's tensor, each element read (by every output)
// before it is written, against values computed here by hand.
#include <gtest/gtest.h>

#include "compile/compiler_info.h"
#include "compile/jit.h"
#include "compile/tensor_call.h"
#include "core/error.h"
#include "core/random.h"

namespace lt::compile {
namespace {

// x' = 2 x + z written over x, and x + 1 (the old x) as a second output.
KernelGraph twice_plus(bool in_place) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, DType::F32);
  const Value z = g.input(ShapeClass::Row, DType::F32);
  const Value y = g.add(g.mul(x, g.constant(2.0)), z);
  if (in_place) {
    g.output_over(y, x);
  } else {
    g.output(y, DType::F32);
  }
  g.output(g.add(x, g.constant(1.0)), DType::F32);
  return g;
}

TEST(KernelGraphInPlace, KeySaysWhichOutputIsWrittenOverWhichInput) {
  EXPECT_NE(twice_plus(true).key(), twice_plus(false).key());
  EXPECT_NE(twice_plus(true).key().find("@in0"), std::string::npos) << twice_plus(true).key();
}

TEST(KernelGraphInPlace, RefusesWhatCannotBeWrittenInPlace) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, DType::BF16);
  const Value row = g.input(ShapeClass::Row, DType::F32);
  EXPECT_THROW(g.output_over(g.exp(x), row), Error);       // a row input
  EXPECT_THROW(g.output_over(g.exp(x), g.exp(x)), Error);  // not an input
  EXPECT_THROW(g.output_over(g.row_sum(x), x), Error);     // a row value
  g.output_over(g.exp(x), x);
  EXPECT_EQ(g.outputs().back().dtype, DType::BF16);  // stored as the input is
  EXPECT_THROW(g.output_over(g.neg(x), x), Error);   // that input is taken
}

// A kernel with column sums (the GPU's ColSums form recomputes a row's
// reductions per tile of columns, from the row as written so far) takes no
// output over an input; without them the same call is accepted.
TEST(KernelGraphInPlace, AColSumKernelWritesNoOutputOverAnInput) {
  for (bool col_sum : {false, true}) {
    KernelGraph g;
    const Value x = g.input(ShapeClass::Full, DType::F32);
    const Value y = g.mul(x, g.rsqrt(g.row_mean(g.mul(x, x))));
    g.output(y, DType::F32);
    if (col_sum) g.output(g.col_sum(y), DType::F32);
    const Tensor t = Tensor::zeros({4, 8}, DType::F32);
    const std::vector<Tensor> given = {t};
    if (col_sum) {
      EXPECT_THROW(prepare_call(g, {t}, Device::cpu(), given), Error);
    } else {
      EXPECT_NO_THROW(prepare_call(g, {t}, Device::cpu(), given));
    }
  }
}

TEST(CompiledInPlace, WritesTheInputsTensorAfterEveryOutputReadIt) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  const int64_t rows = 3, cols = 37;
  Generator gen(8);
  const Tensor x = Tensor::randn({rows, cols}, gen), z = Tensor::randn({rows}, gen);
  const std::vector<double> x0 = x.to_doubles(), z0 = z.to_doubles();
  const KernelGraph g = twice_plus(true);
  const std::vector<Tensor> out = call(*compile_cpu(g), g, {x, z});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data_ptr(), x.data_ptr());
  const std::vector<double> written = x.to_doubles(), plus_one = out[1].to_doubles();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<size_t>(r * cols + c);
      EXPECT_EQ(written[i], static_cast<float>(static_cast<float>(2 * x0[i]) + z0[r]));
      EXPECT_EQ(plus_one[i], static_cast<float>(x0[i] + 1));
    }
  }
}

}  // namespace
}  // namespace lt::compile
