// The fused classifier on the GPU (ops/classifier.h) against float64: the
// kernel's row losses and gradient on bf16 and f32 logits (the same bits
// on both devices), with and without vocabulary padding; the fused head
// against the CPU's float64 head (itself checked against naive products in
// tests/ops/classifier_test.cpp); and the autograd lm_head_loss, fused on
// the GPU, against the unfused CPU one, forward and backward. Tolerances
// as in kernels_gpu_test.cpp: relative error norm 1e-3 for f32 results,
// 1e-2 for bf16.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "core/random.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "ops/classifier.h"
#include "ops/index_checks.h"
#include "support/cross_entropy_ref.h"
#include "support/errors.h"
#include "support/gradcheck.h"
#include "support/scoped_env.h"

namespace lt {
namespace {

using testing::relative_error_norm;

const Device kGpu = Device::cuda(0);

double tolerance(DType t) {
  return t == DType::BF16 ? 1e-2 : 1e-3;
}

::testing::AssertionResult near(const std::vector<double>& actual,
                                const std::vector<double>& expected, double tol, const char* what) {
  const double err = relative_error_norm(actual, expected);
  std::printf("[rel-err] %s %.3e\n", what, err);
  if (!(err < tol)) {
    return ::testing::AssertionFailure()
           << what << ": relative error norm " << err << " >= " << tol;
  }
  return ::testing::AssertionSuccess();
}

Tensor random_targets(int64_t n, int64_t vocab, Generator& gen, DType dtype) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& t : v) t = gen.uniform() < 0.2 ? -100.0 : static_cast<double>(gen.below(vocab));
  return Tensor::from_doubles(v, {n}, dtype);
}

std::vector<int64_t> as_ids(const Tensor& t) {
  std::vector<int64_t> out;
  for (double v : t.to_doubles()) out.push_back(static_cast<int64_t>(v));
  return out;
}

TEST(ClassifierGpu, KernelMatchesFloat64) {
  LT_REQUIRE_GPU();
  Generator gen(91);
  struct Case {
    int64_t rows, vocab, stride;
  };
  // An odd unpadded row (the scalar path), and GPT-2's vocabulary padded to
  // 50304 as the fused head pads it (16-byte packs, masked tail).
  for (const Case c : {Case{7, 1001, 1001}, Case{64, 50257, 50304}}) {
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " vocab " + std::to_string(c.vocab) + " stride " +
                   std::to_string(c.stride));
      Tensor logits = Tensor::randn({c.rows, c.stride}, gen, dt, 3.0);
      Tensor targets = random_targets(c.rows, c.vocab, gen, DType::I32);
      const std::vector<int64_t> tv = as_ids(targets);
      int64_t count = 0;
      for (int64_t t : tv) count += t != -100;
      // The reference on the very values the GPU sees (bf16 widened exactly).
      const std::vector<double> all = logits.to_doubles();
      std::vector<double> x;
      for (int64_t r = 0; r < c.rows; ++r) {
        x.insert(x.end(), all.begin() + r * c.stride, all.begin() + r * c.stride + c.vocab);
      }
      const testing::CrossEntropyRef ref = testing::cross_entropy_f64(x, tv, c.vocab, -100);
      Tensor gl = logits.to(kGpu);
      Tensor row_loss = Tensor::empty({c.rows}, DType::F32, kGpu);
      ops::classifier_(gl, c.vocab, targets.to(kGpu), -100, 1.0 / static_cast<double>(count),
                       row_loss, true);
      const std::vector<double> losses = row_loss.to_doubles();
      double mean = 0;
      for (double l : losses) mean += l / static_cast<double>(count);
      EXPECT_NEAR(mean, ref.loss, 1e-4 * ref.loss);
      const std::vector<double> g = gl.to_doubles();
      std::vector<double> grad;
      for (int64_t r = 0; r < c.rows; ++r) {
        if (tv[r] == -100) {
          EXPECT_EQ(losses[r], 0.0);
        }
        grad.insert(grad.end(), g.begin() + r * c.stride, g.begin() + r * c.stride + c.vocab);
        for (int64_t k = c.vocab; k < c.stride; ++k) ASSERT_EQ(g[r * c.stride + k], 0.0);
      }
      EXPECT_TRUE(near(grad, ref.grad, tolerance(dt), "classifier gradient"));
    }
  }
}

TEST(ClassifierGpu, BadTargetIsThrownByTheIndexCheck) {
  LT_REQUIRE_GPU();
  Generator gen(92);
  Tensor h = Tensor::randn({4, 8}, gen, DType::BF16).to(kGpu);
  Tensor w = Tensor::randn({21, 8}, gen, DType::BF16).to(kGpu);
  Tensor bad = Tensor::from_vector<int64_t>({3, 21, -100, 0}, {4}).to(kGpu);
  EXPECT_THAT(testing::error_of([&] { ops::lm_head_loss_grads(h, w, bad, 3.0, -100, 64, 8); }),
              ::testing::HasSubstr("21"));
  // The record was cleared by the throw: a good call passes.
  Tensor good = Tensor::from_vector<int64_t>({3, 20, -100, 0}, {4}).to(kGpu);
  EXPECT_NO_THROW(ops::lm_head_loss_grads(h, w, good, 3.0, -100, 64, 8));
}

// GPT-2-like head: hidden 64, vocabulary 50257 padded to 50304, 300 rows in
// chunks of 83, against the same inputs widened to f64 on the CPU.
TEST(ClassifierGpu, FusedHeadMatchesFloat64Head) {
  LT_REQUIRE_GPU();
  Generator gen(93);
  const int64_t n = 300, cols = 64, vocab = 50257;
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor h = Tensor::randn({n, cols}, gen, dt, 1.0);
    // Logits of std ~0.8: their bf16 rounding moves the softmax by ~0.2%.
    Tensor w = Tensor::randn({vocab, cols}, gen, dt, 0.1);
    Tensor targets = random_targets(n, vocab, gen, DType::I64);
    const double denominator = 240.0;
    ops::LmHeadLossGrads want = ops::lm_head_loss_grads(h.to(DType::F64), w.to(DType::F64), targets,
                                                        denominator, -100, int64_t{1} << 30, 1);
    ops::LmHeadLossGrads got = ops::lm_head_loss_grads(h.to(kGpu), w.to(kGpu), targets.to(kGpu),
                                                       denominator, -100, 83 * 50304, 128);
    EXPECT_EQ(got.hidden.dtype(), dt);
    EXPECT_EQ(got.weight.shape(), w.shape());
    // f32 products run on TF32 tensor cores (10-bit mantissas, ops/cuda/gemm.h):
    // the logits and both products carry ~5e-4 each, hence 5e-3 there.
    const double tol = dt == DType::F32 ? 5e-3 : tolerance(dt);
    EXPECT_NEAR(got.loss.item(), want.loss.item(), 1e-3 * want.loss.item());
    EXPECT_TRUE(near(got.hidden.to_doubles(), want.hidden.to_doubles(), tol, "d hidden"));
    EXPECT_TRUE(near(got.weight.to_doubles(), want.weight.to_doubles(), tol, "d weight"));
  }
}

// The autograd head: fused on the GPU (bf16), unfused on the CPU (f32, the
// bf16 inputs widened exactly), with a loss gradient of 1 and of 2.5.
TEST(ClassifierGpu, LmHeadLossFusedMatchesUnfused) {
  const lt::testing::ScopedEnv fused("LT_LM_HEAD", "fused");
  LT_REQUIRE_GPU();
  Generator gen(94);
  const int64_t n = 96, cols = 32, vocab = 1001;
  Tensor h = Tensor::randn({n, cols}, gen, DType::BF16);
  Tensor w = Tensor::randn({vocab, cols}, gen, DType::BF16, 0.2);
  Tensor targets = random_targets(n, vocab, gen, DType::I64);
  for (double seed : {1.0, 2.5}) {
    SCOPED_TRACE("loss gradient " + std::to_string(seed));
    auto run = [&](Device device, DType dtype) {
      Tensor hl = h.to(device, dtype).detach(), wl = w.to(device, dtype).detach();
      hl.set_requires_grad(true);
      wl.set_requires_grad(true);
      Tensor loss = lm_head_loss(hl, wl, targets.to(device), 77.0);
      backward(seed == 1.0 ? loss : scale(loss, seed));
      return std::vector<Tensor>{loss.detach(), hl.grad(), wl.grad()};
    };
    const std::vector<Tensor> want = run(Device::cpu(), DType::F32);
    const std::vector<Tensor> got = run(kGpu, DType::BF16);
    EXPECT_TRUE(got[0].device().is_cuda());
    EXPECT_NEAR(got[0].item(), want[0].item(), 1e-3 * want[0].item());
    EXPECT_TRUE(near(got[1].to_doubles(), want[1].to_doubles(), 1e-2, "lm_head_loss d hidden"));
    EXPECT_TRUE(near(got[2].to_doubles(), want[2].to_doubles(), 1e-2, "lm_head_loss d weight"));
  }
}

}  // namespace
}  // namespace lt
