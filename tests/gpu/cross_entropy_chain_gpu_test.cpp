// The softmax cross-entropy chains (compile/cross_entropy_chain.h) run on
// CUDA as cubins, against the hand-written CUDA cross-entropy
// (ops::cross_entropy, ops::cross_entropy_backward, themselves checked
// against float64 in the ops GPU tests) and against float64, in f32 and
// bf16 logits with ignored rows. The GPU's exp and log need not round as
// the CPU's do: the loss within 1e-6 relative, lse 1e-6, the gradient 1e-5
// relative (f32) or one bf16 step. The kernels come from $LT_GPU_KERNELS
// (GpuKernelPrebuild.* fills it where MLIR is).
#include <gtest/gtest.h>

#include <cmath>

#include "compile/cross_entropy_chain.h"
#include "gpu_test_support.h"
#include "support/cross_entropy_ref.h"
#include "support/gpu_kernel_cases.h"

namespace lt::compile {
namespace {

class CrossEntropyChainGpu : public ::testing::TestWithParam<DType> {};

TEST_P(CrossEntropyChainGpu, EqualsTheHandWrittenKernelsAndFloat64) {
  LT_REQUIRE_GPU();
  const DType dtype = GetParam();
  const int64_t n = 67, v = 5003, ignore = -100;  // rows of a block's 256 threads and a tail
  const lt::testing::CrossEntropyCase c =
      lt::testing::random_cross_entropy_case(n, v, 7, ignore, 11);
  const Tensor host_logits = Tensor::from_vector(c.logits, {n, v}).to(dtype);
  const std::vector<int64_t>& targets = c.targets;
  const lt::testing::CrossEntropyRef ref =
      lt::testing::cross_entropy_f64(host_logits.to_doubles(), targets, v, ignore);
  const Tensor logits = host_logits.to(Device::cuda(0));
  const Tensor target_tensor = Tensor::from_vector(targets, {n}).to(Device::cuda(0));
  KernelCache cache(testing::gpu_test_kernel_folder());
  const ops::CrossEntropyOutput got = compiled_cross_entropy(cache, logits, target_tensor, ignore);
  const ops::CrossEntropyOutput hand = ops::cross_entropy(logits, target_tensor, ignore);
  EXPECT_EQ(got.count, hand.count);
  const double loss = got.loss.to(Device::cpu()).item();
  EXPECT_NEAR(loss, ref.loss, 1e-6 * ref.loss);
  EXPECT_NEAR(loss, hand.loss.to(Device::cpu()).item(), 1e-6 * ref.loss);
  const std::vector<double> lse = got.lse.to(Device::cpu()).to_doubles();
  const std::vector<double> hand_lse = hand.lse.to(Device::cpu()).to_doubles();
  for (int64_t i = 0; i < n; ++i) {
    if (targets[static_cast<size_t>(i)] != ignore) {
      EXPECT_NEAR(lse[i], hand_lse[i], 1e-6 * std::abs(hand_lse[i]) + 1e-6) << "row " << i;
    }
  }
  const double grad_loss = 0.75;
  const Tensor grad = compiled_cross_entropy_backward(cache, grad_loss, logits, target_tensor,
                                                      got.lse, ignore, got.count);
  const Tensor hand_grad = ops::cross_entropy_backward(
      Tensor::scalar(grad_loss, DType::F64), logits, target_tensor, hand.lse, ignore, hand.count);
  const std::vector<double> g = grad.to(Device::cpu()).to_doubles();
  const std::vector<double> hg = hand_grad.to(Device::cpu()).to_doubles();
  const double rel = dtype == DType::BF16 ? 0x1.0p-7 : 1e-5;
  for (size_t e = 0; e < g.size(); ++e) {
    const double want = ref.grad[e] * grad_loss;
    ASSERT_NEAR(g[e], want, rel * std::abs(want) + 1e-9) << "element " << e;
    ASSERT_NEAR(g[e], hg[e], rel * std::abs(hg[e]) + 1e-9) << "element " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CrossEntropyChainGpu, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lt::compile
