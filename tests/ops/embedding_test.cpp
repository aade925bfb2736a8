// Embedding: forward against direct row lookups, backward against a naive
// scatter-add, gradients against central differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/index_checks.h"
#include "support/errors.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::randn64;

using testing::error_of;

// Ids with deliberate repeats, so the backward must add, not overwrite.
Tensor repeated_ids(DType dtype) {
  std::vector<double> v = {3, 0, 10, 3, 7, 3, 1, 10, 0, 5, 3, 9, 2, 2, 4};
  return Tensor::from_doubles(v, {3, 5}, dtype);
}

TEST(Embedding, ForwardGathersRowsForI32AndI64Ids) {
  Generator gen(11);
  const int64_t V = 11, C = 13;
  Tensor w = randn64({V, C}, gen);
  auto wv = w.to_doubles();
  for (DType id_type : {DType::I64, DType::I32}) {
    Tensor ids = repeated_ids(id_type);
    Tensor y = ops::embedding(w, ids);
    ASSERT_EQ(y.shape(), (Shape{3, 5, C}));
    auto iv = ids.to_doubles(), yv = y.to_doubles();
    for (size_t i = 0; i < iv.size(); ++i) {
      for (int64_t c = 0; c < C; ++c) {
        EXPECT_EQ(yv[i * C + c], wv[static_cast<size_t>(iv[i]) * C + c]) << i << "," << c;
      }
    }
  }
}

TEST(Embedding, HalfWeightsAreCopiedBitForBitAndStridedWeightsWork) {
  Generator gen(12);
  Tensor w = randn64({11, 13}, gen);
  Tensor wb = w.to(DType::BF16);
  Tensor ids = repeated_ids(DType::I64);
  Tensor y = ops::embedding(wb, ids);
  EXPECT_EQ(y.dtype(), DType::BF16);
  EXPECT_TRUE(all_close(y.to(DType::F64), ops::embedding(wb.to(DType::F64), ids), 0, 0));
  // A transposed (non-contiguous) table gives the same rows as its copy.
  Tensor wt = randn64({13, 11}, gen).transpose(0, 1);
  EXPECT_TRUE(all_close(ops::embedding(wt, ids), ops::embedding(wt.contiguous(), ids), 0, 0));
}

TEST(Embedding, OutOfRangeIdsNameTheIdAndTheVocabulary) {
  Tensor w = Tensor::zeros({11, 4}, DType::F32);
  Tensor big = Tensor::from_vector<int64_t>({1, 2, 11}, {3});
  std::string msg = error_of([&] { ops::embedding(w, big); });
  EXPECT_THAT(msg, ::testing::HasSubstr("id 11"));
  EXPECT_THAT(msg, ::testing::HasSubstr("[0, 11)"));
  Tensor neg = Tensor::from_vector<int32_t>({-1}, {1});
  EXPECT_THAT(error_of([&] { ops::embedding(w, neg); }), ::testing::HasSubstr("id -1"));
  Tensor floats = Tensor::zeros({2}, DType::F32);
  EXPECT_THAT(error_of([&] { ops::embedding(w, floats); }), ::testing::HasSubstr("i32 or i64"));
}

// DeferIndexChecks only lets GPU kernels report a bad index later: on the
// CPU every op still checks before any work, inside the scope as outside,
// and the scope nests and restores.
TEST(Embedding, DeferredChecksStillThrowAtOnceOnTheCpu) {
  EXPECT_FALSE(ops::index_checks_deferred());
  Tensor w = Tensor::zeros({11, 4}, DType::F32);
  Tensor big = Tensor::from_vector<int64_t>({1, 2, 11}, {3});
  {
    ops::DeferIndexChecks outer;
    {
      ops::DeferIndexChecks inner;
      EXPECT_TRUE(ops::index_checks_deferred());
    }
    EXPECT_TRUE(ops::index_checks_deferred());
    EXPECT_THAT(error_of([&] { ops::embedding(w, big); }), ::testing::HasSubstr("id 11"));
    EXPECT_THAT(error_of([&] {
                  ops::embedding_backward(Tensor::zeros({3, 4}, DType::F32), big, 11);
                }),
                ::testing::HasSubstr("id 11"));
    Tensor logits = Tensor::zeros({3, 11}, DType::F32);
    EXPECT_THAT(error_of([&] { ops::cross_entropy(logits, big); }),
                ::testing::HasSubstr("target 11 at row 2"));
    EXPECT_NO_THROW(ops::check_index_errors(Device::cpu()));
  }
  EXPECT_FALSE(ops::index_checks_deferred());
}

TEST(Embedding, BackwardScatterAddsRepeatedIds) {
  Generator gen(13);
  const int64_t V = 11, C = 13;
  Tensor ids = repeated_ids(DType::I32);
  Tensor g = randn64({3, 5, C}, gen);
  Tensor dw = ops::embedding_backward(g, ids, V);
  ASSERT_EQ(dw.shape(), (Shape{V, C}));
  std::vector<double> expected(static_cast<size_t>(V * C), 0.0);
  auto iv = ids.to_doubles(), gv = g.to_doubles();
  for (size_t i = 0; i < iv.size(); ++i) {
    for (int64_t c = 0; c < C; ++c) expected[static_cast<size_t>(iv[i]) * C + c] += gv[i * C + c];
  }
  EXPECT_TRUE(all_close(dw.to_doubles(), expected, 1e-12, 0));
  // Rows no id refers to (6 and 8) get exactly zero.
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(dw.to_doubles()[6 * C + c], 0.0);
    EXPECT_EQ(dw.to_doubles()[8 * C + c], 0.0);
  }
  // bf16 gradients accumulate in f32 and round once.
  Tensor dwb = ops::embedding_backward(g.to(DType::BF16), ids, V);
  EXPECT_EQ(dwb.dtype(), DType::BF16);
  EXPECT_LT(testing::relative_error_norm(dwb.to_doubles(), expected), 1e-2);
}

TEST(EmbeddingGrad, WeightGradientMatchesFiniteDifferences) {
  Generator gen(14);
  Tensor w = randn64({11, 13}, gen);
  for (DType id_type : {DType::I64, DType::I32}) {
    EXPECT_TRUE(
        gradcheck([](auto& x) { return embedding(x[0], x[1]); }, {w, repeated_ids(id_type)}));
  }
}

TEST(EmbeddingGrad, NoGraphWithoutGradAndRepeatedIdsCount) {
  Generator gen(15);
  Tensor w = randn64({11, 13}, gen);
  Tensor y = embedding(w, repeated_ids(DType::I64));
  EXPECT_FALSE(y.requires_grad());
  Tensor wg = w.clone();
  wg.set_requires_grad(true);
  Tensor loss = sum(embedding(wg, repeated_ids(DType::I64)));
  backward(loss);
  // d sum / d w[v, c] = number of times v appears.
  auto grad = wg.grad().to_doubles();
  EXPECT_EQ(grad[3 * 13], 4.0);
  EXPECT_EQ(grad[10 * 13 + 12], 2.0);
  EXPECT_EQ(grad[6 * 13], 0.0);
}

TEST(Embedding, LargeShapesRunInParallelAndMatchLoops) {
  // Enough ids and vocabulary rows to be split into several chunks.
  Generator gen(16);
  const int64_t V = 3001, C = 13, N = 4000;
  Tensor w = randn64({V, C}, gen);
  std::vector<int64_t> iv(N);
  for (auto& id : iv) id = static_cast<int64_t>(gen.below(50)) * 60;  // repeats, spread over V
  Tensor ids = Tensor::from_vector<int64_t>(iv, {N});
  auto wv = w.to_doubles(), yv = ops::embedding(w, ids).to_doubles();
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) ASSERT_EQ(yv[i * C + c], wv[iv[i] * C + c]) << i;
  Tensor g = randn64({N, C}, gen);
  auto gv = g.to_doubles();
  std::vector<double> expected(static_cast<size_t>(V * C), 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) expected[iv[i] * C + c] += gv[i * C + c];
  EXPECT_TRUE(all_close(ops::embedding_backward(g, ids, V).to_doubles(), expected, 1e-12, 1e-12));
}

}  // namespace
}  // namespace lt
