// The fused classifier (ops/classifier.h) on the CPU against float64
// formulas written here: row losses and the gradient written over padded
// logits, and the whole fused head (loss, d hidden, d weight) against the
// logits, softmax and products computed naively.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "ops/classifier.h"
#include "support/cross_entropy_ref.h"
#include "support/errors.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::error_of;
using testing::randn64;

// Row r's first `vocab` of `stride` values.
std::vector<double> unpadded(const Tensor& t, int64_t vocab) {
  const std::vector<double> all = t.to_doubles();
  const int64_t rows = t.size(0), stride = t.size(1);
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    out.insert(out.end(), all.begin() + r * stride, all.begin() + r * stride + vocab);
  }
  return out;
}

TEST(Classifier, RowLossesAndGradientOverPaddedLogits) {
  Generator gen(81);
  const int64_t rows = 6, vocab = 13, stride = 16;
  const std::vector<int64_t> tv = {4, -100, 12, 0, 7, 4};
  const int64_t count = 5;
  for (DType target_dtype : {DType::I64, DType::I32}) {
    Tensor logits = randn64({rows, stride}, gen, 3.0);
    const std::vector<double> x = unpadded(logits, vocab);
    const testing::CrossEntropyRef ref = testing::cross_entropy_f64(x, tv, vocab, -100);
    Tensor targets = Tensor::from_vector<int64_t>(tv, {rows}).to(target_dtype);
    Tensor row_loss = Tensor::empty({rows}, DType::F64);
    ops::classifier_(logits, vocab, targets, -100, 1.0 / count, row_loss, true);
    // Row losses: lse - x[t], 0 for the ignored row; their mean is the reference loss.
    const std::vector<double> losses = row_loss.to_doubles();
    EXPECT_EQ(losses[1], 0.0);
    EXPECT_NEAR(std::accumulate(losses.begin(), losses.end(), 0.0) / count, ref.loss, 1e-12);
    const double* row2 = x.data() + 2 * vocab;
    double m = *std::max_element(row2, row2 + vocab), s = 0;
    for (int64_t c = 0; c < vocab; ++c) s += std::exp(row2[c] - m);
    EXPECT_NEAR(losses[2], m + std::log(s) - row2[12], 1e-12);
    // The gradient over the logits, for a mean over the counted rows; the padding is 0.
    EXPECT_TRUE(all_close(unpadded(logits, vocab), ref.grad, 1e-13, 0));
    const std::vector<double> g = logits.to_doubles();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = vocab; c < stride; ++c) EXPECT_EQ(g[r * stride + c], 0.0);
    }
  }
}

TEST(Classifier, LossOnlyLeavesLogitsAndBadTargetsAreNamed) {
  Generator gen(82);
  Tensor logits = randn64({3, 9}, gen);
  const std::vector<double> before = logits.to_doubles();
  Tensor row_loss = Tensor::empty({3}, DType::F64);
  ops::classifier_(logits, 9, Tensor::from_vector<int64_t>({1, 8, 0}, {3}), -100, 1.0, row_loss,
                   false);
  EXPECT_EQ(logits.to_doubles(), before);
  EXPECT_THAT(error_of([&] {
                ops::classifier_(logits, 8, Tensor::from_vector<int64_t>({1, 8, 0}, {3}), -100, 1.0,
                                 row_loss, true);
              }),
              ::testing::HasSubstr("target 8 at row 1 is outside the vocabulary [0, 8)"));
  EXPECT_EQ(logits.to_doubles(), before);  // refused before any work
  EXPECT_THAT(error_of([&] {
                ops::classifier_(logits, 10, Tensor::from_vector<int64_t>({1, 2, 0}, {3}), -100,
                                 1.0, row_loss, true);
              }),
              ::testing::HasSubstr("vocabulary 10 does not fit"));
}

// The head by hand in float64: logits = h W^T, the cross-entropy reference,
// then d hidden = G W and d weight = G^T h for G = d loss / d logits.
TEST(Classifier, FusedHeadMatchesNaiveProductsInChunks) {
  Generator gen(83);
  const int64_t n = 11, cols = 5, vocab = 13;
  Tensor h = randn64({n, cols}, gen), w = randn64({vocab, cols}, gen);
  std::vector<int64_t> tv(n);
  for (int64_t r = 0; r < n; ++r) tv[r] = r % 4 == 1 ? -100 : static_cast<int64_t>(gen.below(13));
  const int64_t count = std::count_if(tv.begin(), tv.end(), [](int64_t t) { return t != -100; });
  const std::vector<double> hv = h.to_doubles(), wv = w.to_doubles();
  std::vector<double> logits(n * vocab, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t v = 0; v < vocab; ++v) {
      for (int64_t c = 0; c < cols; ++c)
        logits[r * vocab + v] += hv[r * cols + c] * wv[v * cols + c];
    }
  }
  const testing::CrossEntropyRef ref = testing::cross_entropy_f64(logits, tv, vocab, -100);
  std::vector<double> dh(n * cols, 0.0), dw(vocab * cols, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t v = 0; v < vocab; ++v) {
      for (int64_t c = 0; c < cols; ++c) {
        dh[r * cols + c] += ref.grad[r * vocab + v] * wv[v * cols + c];
        dw[v * cols + c] += ref.grad[r * vocab + v] * hv[r * cols + c];
      }
    }
  }
  // Chunks of 3 rows (the last one 2) over a vocabulary padded to 16, and
  // one chunk without padding.
  for (auto [chunk_logits, pad_to] : {std::pair<int64_t, int64_t>{48, 8}, {1000, 1}}) {
    SCOPED_TRACE("chunk_logits " + std::to_string(chunk_logits));
    ops::LmHeadLossGrads got =
        ops::lm_head_loss_grads(h, w, Tensor::from_vector<int64_t>(tv, {n}),
                                static_cast<double>(count), -100, chunk_logits, pad_to);
    EXPECT_EQ(got.loss.dim(), 0);
    EXPECT_NEAR(got.loss.item(), ref.loss, 1e-12);
    EXPECT_EQ(got.hidden.shape(), h.shape());
    EXPECT_EQ(got.weight.shape(), w.shape());
    EXPECT_TRUE(all_close(got.hidden.to_doubles(), dh, 1e-13, 1e-12));
    EXPECT_TRUE(all_close(got.weight.to_doubles(), dw, 1e-13, 1e-12));
  }
}

}  // namespace
}  // namespace lt
