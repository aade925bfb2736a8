// Named chains compiled through MLIR against the hand-written CPU ops they
// fuse (ops::swiglu, ops::gelu_tanh, ops::softmax; ops::add then
// ops::rms_norm), in f32 and bf16.
#include <gtest/gtest.h>

#include <cmath>

#include "compile/chains.h"
#include "compile/compiler_info.h"
#include "compile/jit.h"
#include "compile/tensor_call.h"
#include "ops/activations.h"
#include "ops/elementwise.h"
#include "ops/norm.h"

namespace lt::compile {
namespace {

std::vector<double> as_doubles(const Tensor& t) {
  const Tensor f = ops::cast(t, DType::F64);
  const double* p = f.data<double>();
  return std::vector<double>(p, p + f.numel());
}

// f32: both round each f32 op (the ops sum rows in double, the kernel in
// f32), so a relative 1e-5. bf16: both compute in f32 and round to bf16 at
// the same places, so at most one bf16 ulp apart, and nearly always equal
// (a differing element is one whose f32 value lies at a rounding boundary).
// `absolute`, where given: per element, an error of the hand-written
// kernel's own to allow on top (and then elements may differ).
void expect_same(const Tensor& compiled, const Tensor& hand_written, const char* what,
                 const std::vector<double>& absolute = {}) {
  ASSERT_EQ(compiled.shape(), hand_written.shape()) << what;
  ASSERT_EQ(compiled.dtype(), hand_written.dtype()) << what;
  const std::vector<double> a = as_doubles(compiled), b = as_doubles(hand_written);
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double tolerance = (compiled.dtype() == DType::BF16 ? std::abs(b[i]) * 0x1.0p-7
                                                              : 1e-5 * std::abs(b[i]) + 1e-7) +
                             (absolute.empty() ? 0.0 : absolute[i]);
    EXPECT_LE(std::abs(a[i] - b[i]), tolerance) << what << " element " << i;
    if (a[i] != b[i]) ++differing;
  }
  if (compiled.dtype() == DType::BF16 && absolute.empty()) {
    EXPECT_LE(differing, a.size() / 100 + 1) << what;
  }
}

class NamedChain : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
};

TEST_P(NamedChain, SwigluForwardEqualsOpsSwiglu) {
  const DType dtype = GetParam();
  Generator gen(7);
  const Tensor gate = Tensor::randn({3, 5, 96}, gen, dtype, 2.0);
  const Tensor up = Tensor::randn({3, 5, 96}, gen, dtype);
  const KernelGraph graph = swiglu_forward(dtype);
  const std::vector<Tensor> out = call(*compile_cpu(graph), graph, {gate, up});
  expect_same(out.at(0), ops::swiglu(gate, up), "swiglu");
}

TEST_P(NamedChain, GeluTanhForwardEqualsOpsGeluTanh) {
  const DType dtype = GetParam();
  Generator gen(9);
  const Tensor x = Tensor::randn({6, 70}, gen, dtype, 3.0);
  const KernelGraph graph = gelu_tanh_forward(dtype);
  // ops::gelu_tanh's 1 + tanh(u) cancels as u goes negative: its f32 tanh
  // is within about an ulp of -1 there, so its GELU is off by up to about
  // |x| 2^-24 (0 where the value is below that); the compiled chain has no
  // cancellation (chains.h; tests/compile/gelu_accuracy_test.cpp holds it
  // to float64).
  std::vector<double> cancelled = as_doubles(x);
  for (double& v : cancelled) v = std::abs(v) * 0x1.0p-22;
  expect_same(call(*compile_cpu(graph), graph, {x}).at(0), ops::gelu_tanh(x), "gelu", cancelled);
}

TEST_P(NamedChain, SoftmaxForwardEqualsOpsSoftmax) {
  const DType dtype = GetParam();
  Generator gen(10);
  const Tensor x = Tensor::randn({2, 5, 50}, gen, dtype, 4.0);
  const KernelGraph graph = softmax_forward(dtype);
  expect_same(call(*compile_cpu(graph), graph, {x}).at(0), ops::softmax(x), "softmax");
}

TEST_P(NamedChain, ResidualAddRmsNormForwardEqualsOpsAddThenRmsNorm) {
  const DType dtype = GetParam();
  const double eps = 1e-6;
  Generator gen(8);
  const Tensor x = Tensor::randn({4, 3, 80}, gen, dtype);
  const Tensor residual = Tensor::randn({4, 3, 80}, gen, dtype, 3.0);
  const Tensor weight = Tensor::uniform({80}, gen, 0.5, 1.5, dtype);
  const KernelGraph graph = residual_rms_norm_forward(dtype, eps);
  const std::vector<Tensor> out = call(*compile_cpu(graph), graph, {x, residual, weight});

  const Tensor h = ops::add(x, residual);
  const ops::RmsNormOutput norm = ops::rms_norm(h, weight, eps);
  expect_same(out.at(0), h, "h");
  expect_same(out.at(1), norm.y, "y");
  ASSERT_EQ(out.at(2).shape(), (Shape{4, 3}));
  const std::vector<double> rstd = as_doubles(out.at(2)), want = as_doubles(norm.rstd);
  for (size_t i = 0; i < rstd.size(); ++i) EXPECT_NEAR(rstd[i], want[i], 1e-5 * want[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NamedChain, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CompiledKernelCall, MismatchedShapesNameTheInput) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  const KernelGraph graph = residual_rms_norm_forward(DType::F32, 1e-6);
  const std::unique_ptr<CpuKernel> kernel = compile_cpu(graph);
  const Tensor x = Tensor::zeros({2, 8});
  try {
    call(*kernel, graph, {x, x, Tensor::zeros({7})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 2 has 7 columns where earlier inputs have 8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(call(*kernel, graph, {x, x.to(DType::BF16), Tensor::zeros({8})}), Error);
}

}  // namespace
}  // namespace lt::compile
