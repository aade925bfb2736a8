// Views against naive index arithmetic: every element of a view must be the
// element the row-major formula says, for random shapes and view chains.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/grad_mode.h"
#include "core/tensor.h"

namespace lt {
namespace {

Tensor arange(const Shape& shape) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  return Tensor::from_doubles(v, shape, DType::F64);
}

// Row-major multi-index of flat position `i` in `shape`.
std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + idx[d];
  return i;
}

rc::Gen<Shape> gen_shape(int max_rank) {
  return rc::gen::mapcat(rc::gen::inRange(1, max_rank + 1), [](int rank) {
    return rc::gen::container<Shape>(static_cast<size_t>(rank), rc::gen::inRange<int64_t>(1, 6));
  });
}

RC_GTEST_PROP(TensorViews, PermuteMatchesIndexMath, ()) {
  Shape shape = *gen_shape(4);
  std::vector<int64_t> order(shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(*rc::gen::arbitrary<uint32_t>());
  std::shuffle(order.begin(), order.end(), rng);
  Tensor base = arange(shape);
  Tensor v = base.permute(order);
  std::vector<double> got = v.to_doubles();
  for (int64_t i = 0; i < v.numel(); ++i) {
    auto idx = unravel(i, v.shape());
    std::vector<int64_t> src(shape.size());
    for (size_t d = 0; d < order.size(); ++d) src[order[d]] = idx[d];
    RC_ASSERT(got[i] == static_cast<double>(ravel(src, shape)));
  }
}

RC_GTEST_PROP(TensorViews, SliceOfTransposeMatchesIndexMath, ()) {
  Shape shape = *gen_shape(3);
  if (shape.size() < 2) shape.push_back(3);
  Shape tshape = shape;
  std::swap(tshape[0], tshape[1]);
  const int64_t d = *rc::gen::inRange<int64_t>(0, static_cast<int64_t>(shape.size()));
  const int64_t n = tshape[d];
  const int64_t start = *rc::gen::inRange<int64_t>(0, n);
  const int64_t end = *rc::gen::inRange<int64_t>(start, n + 1);
  const int64_t step = *rc::gen::inRange<int64_t>(1, 3);
  Tensor base = arange(shape);
  Tensor v = base.transpose(0, 1).slice(d, start, end, step);
  std::vector<double> got = v.contiguous().to_doubles();
  RC_ASSERT(v.contiguous().is_contiguous());
  for (int64_t i = 0; i < v.numel(); ++i) {
    auto idx = unravel(i, v.shape());
    idx[d] = start + idx[d] * step;  // index into the transposed tensor
    std::swap(idx[0], idx[1]);       // index into the base
    RC_ASSERT(got[i] == static_cast<double>(ravel(idx, shape)));
  }
}

RC_GTEST_PROP(TensorViews, ExpandBroadcastsLikeNumpy, ()) {
  Shape target = *gen_shape(4);
  // A source shape: a suffix of target with some dims set to 1.
  const size_t drop = *rc::gen::inRange<size_t>(0, target.size());
  Shape src(target.begin() + static_cast<int64_t>(drop), target.end());
  for (auto& s : src) {
    if (*rc::gen::arbitrary<bool>()) s = 1;
  }
  Tensor base = arange(src);
  Tensor v = base.expand(target);
  RC_ASSERT(broadcast_shapes(src, target) == target);
  std::vector<double> got = v.to_doubles();
  for (int64_t i = 0; i < v.numel(); ++i) {
    auto idx = unravel(i, target);
    std::vector<int64_t> sidx(idx.begin() + static_cast<int64_t>(drop), idx.end());
    for (size_t k = 0; k < src.size(); ++k) {
      if (src[k] == 1) sidx[k] = 0;
    }
    RC_ASSERT(got[i] == static_cast<double>(ravel(sidx, src)));
  }
}

TEST(Tensor, ReshapeIsAViewOnlyWhenContiguous) {
  Tensor t = arange({2, 3, 4});
  Tensor r = t.reshape({6, 4});
  EXPECT_EQ(r.storage(), t.storage());
  Tensor tt = t.transpose(1, 2);
  EXPECT_FALSE(tt.is_contiguous());
  Tensor rr = tt.reshape({2, 12});
  EXPECT_NE(rr.storage(), t.storage());
  EXPECT_EQ(rr.to_doubles()[1], 4.0);  // element [0, 0, 1] of the transpose = base [0, 1, 0]
  EXPECT_EQ(t.view({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_THROW(t.view({5, -1}), Error);
  EXPECT_THROW(tt.view({24}), Error);
}

TEST(Tensor, SelectSqueezeUnsqueeze) {
  Tensor t = arange({3, 4});
  EXPECT_EQ(t.select(1, 2).to_doubles(), (std::vector<double>{2, 6, 10}));
  EXPECT_EQ(t.unsqueeze(1).shape(), (Shape{3, 1, 4}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(t.unsqueeze(0).squeeze(0).shape(), (Shape{3, 4}));
  EXPECT_THROW(t.squeeze(0), Error);
}

TEST(Tensor, ToConvertsDtypeAndRoundsBf16) {
  Tensor t = Tensor::from_vector<float>({1.0f, 1.00390625f, 3.0f}, {3});
  Tensor b = t.to(DType::BF16);
  EXPECT_EQ(b.dtype(), DType::BF16);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7; even mantissa wins: 1.
  EXPECT_EQ(b.to_doubles(), (std::vector<double>{1.0, 1.0, 3.0}));
  EXPECT_EQ(t.to(DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 3}));
}

TEST(Tensor, CopyBroadcastsAndFills) {
  Tensor dst = Tensor::zeros({2, 3});
  dst.copy_(Tensor::from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(dst.to_doubles(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  dst.slice(1, 1, 2).fill_(9);
  EXPECT_EQ(dst.to_doubles(), (std::vector<double>{1, 9, 3, 1, 9, 3}));
  EXPECT_THROW(dst.copy_(Tensor::zeros({4})), Error);
}

TEST(Tensor, RawViewsRefuseTensorsThatRequireGrad) {
  Tensor t = Tensor::zeros({2, 2});
  t.set_requires_grad(true);
  EXPECT_THROW(t.transpose(0, 1), Error);
  EXPECT_NO_THROW(t.detach().transpose(0, 1));
  GradMode::set_enabled(false);
  EXPECT_NO_THROW(t.transpose(0, 1));
  GradMode::set_enabled(true);
  EXPECT_THROW(Tensor::zeros({2}, DType::I32).set_requires_grad(true), Error);
}

TEST(Tensor, FromStorageChecksBounds) {
  auto storage = std::make_shared<Storage>(64, cpu_allocator());
  EXPECT_NO_THROW(Tensor::from_storage(storage, 0, {4, 4}, {4, 1}, DType::F32));
  EXPECT_THROW(Tensor::from_storage(storage, 1, {4, 4}, {4, 1}, DType::F32), Error);
}

}  // namespace
}  // namespace lt
