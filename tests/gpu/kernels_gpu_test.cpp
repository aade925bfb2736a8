// The CUDA op kernels against the CPU backend: every op runs on the same
// random data on both devices (the GPU copy is made from the CPU tensor, so
// bf16 inputs are the same bits), and every output and gradient must agree
// within the tolerances, as a relative error norm
// ||gpu - cpu|| / ||cpu||: 1e-3 for f32, 1e-2 for bf16. Sizes are odd
// (rows 7, hidden 13, vocabulary 1001: scalar paths and tails) and
// realistic (8 x 128 x 2048, vocabulary 151936: the 16-byte paths).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "core/cuda/device_info.h"
#include "core/error.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "ops/activations.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/index_checks.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "support/cross_entropy_ref.h"
#include "support/errors.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::error_of;
using testing::relative_error_norm;

const Device kGpu = Device::cuda(0);
const std::vector<DType> kDtypes = {DType::F32, DType::BF16};

double tolerance(DType t) {
  return t == DType::BF16 ? 1e-2 : 1e-3;
}

Tensor gpu(const Tensor& t) {
  return t.to(kGpu);
}

Tensor randn(const Shape& shape, DType dtype, Generator& gen, double stddev = 1.0) {
  return Tensor::randn(shape, gen, dtype, stddev);
}

// The GPU result `actual` against the CPU result `expected`: same shape
// and dtype, and a relative error norm below `tol`.
::testing::AssertionResult close(const Tensor& actual, const Tensor& expected, double tol) {
  if (!actual.defined() || !expected.defined()) {
    return ::testing::AssertionFailure()
           << "undefined tensor: " << actual.str() << " vs " << expected.str();
  }
  if (!actual.device().is_cuda()) {
    return ::testing::AssertionFailure() << "result not on the GPU: " << actual.str();
  }
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << actual.str() << " vs " << expected.str();
  }
  const double err = relative_error_norm(actual.to_doubles(), expected.to_doubles());
  // LT_KERNEL_ERRORS=1 prints every measured error (for the record of a GPU run).
  if (std::getenv("LT_KERNEL_ERRORS")) {
    std::printf("[rel-err] %s %s %.3e %s\n",
                ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                dtype_name(actual.dtype()), err, actual.str().c_str());
  }
  if (!(err < tol)) {  // NaN fails too
    return ::testing::AssertionFailure()
           << "relative error norm " << err << " >= " << tol << " for " << actual.str();
  }
  return ::testing::AssertionSuccess() << "relative error norm " << err;
}

#define EXPECT_CLOSE(actual, expected, dtype) EXPECT_TRUE(close(actual, expected, tolerance(dtype)))

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.to_doubles() == b.to_doubles();
}

// ---------------------------------------------------------------- the harness

// The comparison must be able to fail: a GPU result against a CPU
// reference perturbed by twice the tolerance is refused, and a wrong dtype
// or shape is refused.
TEST(KernelsHarness, RefusesAPerturbedReference) {
  LT_REQUIRE_GPU();
  Generator gen(1);
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = randn({7, 13}, dt, gen);
    Tensor y = ops::silu(gpu(x));
    Tensor ref = ops::silu(x);
    EXPECT_TRUE(close(y, ref, tolerance(dt)));
    Tensor perturbed = ops::scale(ref, 1.0 + 2 * tolerance(dt));
    EXPECT_FALSE(close(y, perturbed, tolerance(dt)));
    EXPECT_FALSE(close(y, ref.to(dt == DType::F32 ? DType::BF16 : DType::F32), 1.0));
    EXPECT_FALSE(close(y, ops::silu(randn({7, 12}, dt, gen)), 1.0));
  }
}

TEST(KernelsHarness, RefusesF64WithAClearError) {
  LT_REQUIRE_GPU();
  Tensor x = Tensor::empty({4}, DType::F64, kGpu);
  EXPECT_THAT(error_of([&] { ops::silu(x); }), ::testing::HasSubstr("f32 or bf16"));
  EXPECT_THAT(error_of([&] { ops::add(x, x); }), ::testing::HasSubstr("f32 or bf16"));
}

// ---------------------------------------------------------------- elementwise

struct BinaryCase {
  Shape a, b;
};

TEST(KernelsElementwise, BinaryOpsWithBroadcasting) {
  LT_REQUIRE_GPU();
  Generator gen(2);
  const std::vector<BinaryCase> cases = {
      {{7, 13}, {7, 13}},                // same shape, scalar path (13 is odd)
      {{7, 13}, {13}},                   // bias onto rows
      {{13}, {7, 13}},                   // the broadcast operand first
      {{3, 7, 13}, {7, 13}},             // a position table onto a batch
      {{7, 13}, {7, 1}},                 // a column: the general strided path
      {{3, 1, 13}, {1, 7, 1}},           // both broadcast
      {{8, 128, 2048}, {8, 128, 2048}},  // realistic, 16-byte packs
      {{8, 128, 2048}, {2048}},
      {{8, 128, 2048}, {128, 2048}},
  };
  for (DType dt : kDtypes) {
    for (const BinaryCase& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(c.a) + " op " + shape_str(c.b));
      Tensor a = randn(c.a, dt, gen);
      // Away from zero, so that division is well conditioned.
      Tensor b = Tensor::uniform(c.b, gen, 0.5, 2.0, dt);
      Tensor ga = gpu(a), gb = gpu(b);
      EXPECT_CLOSE(ops::add(ga, gb), ops::add(a, b), dt);
      EXPECT_CLOSE(ops::sub(ga, gb), ops::sub(a, b), dt);
      EXPECT_CLOSE(ops::mul(ga, gb), ops::mul(a, b), dt);
      EXPECT_CLOSE(ops::div(ga, gb), ops::div(a, b), dt);
    }
  }
}

TEST(KernelsElementwise, BinaryOpsOnStridedViews) {
  LT_REQUIRE_GPU();
  Generator gen(3);
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = randn({13, 7}, dt, gen), b = randn({7, 13}, dt, gen);
    Tensor at = a.transpose(0, 1);  // [7, 13], strides (1, 7)
    EXPECT_CLOSE(ops::add(gpu(a).transpose(0, 1), gpu(b)), ops::add(at, b), dt);
    EXPECT_CLOSE(ops::mul(gpu(b), gpu(a).transpose(0, 1)), ops::mul(b, at), dt);
    Tensor s = randn({7, 26}, dt, gen);
    Tensor gs = gpu(s).slice(1, 0, 26, 2);  // every other column
    EXPECT_CLOSE(ops::sub(gs, gpu(b)), ops::sub(s.slice(1, 0, 26, 2), b), dt);
  }
}

TEST(KernelsElementwise, ScaleAndAxpby) {
  LT_REQUIRE_GPU();
  Generator gen(4);
  for (DType dt : kDtypes) {
    for (const Shape& shape : {Shape{7, 13}, Shape{8, 128, 2048}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      Tensor a = randn(shape, dt, gen), b = randn(shape, dt, gen);
      EXPECT_CLOSE(ops::scale(gpu(a), -0.37), ops::scale(a, -0.37), dt);
      EXPECT_CLOSE(ops::axpby(gpu(a), 0.9, gpu(b), -1.7), ops::axpby(a, 0.9, b, -1.7), dt);
    }
  }
}

// a + b in float64 rounded once to `dtype`: exact for f32 and bf16 inputs,
// so add's rule (widen to f32, add, round to nearest) gives these bits.
std::vector<double> rounded_sums(const Tensor& a, const Tensor& b, DType dtype) {
  const std::vector<double> av = a.to(Device::cpu()).to_doubles();
  const std::vector<double> bv = b.to(Device::cpu()).to_doubles();
  std::vector<double> sums(av.size());
  for (size_t i = 0; i < av.size(); ++i) {
    const float s = static_cast<float>(av[i] + bv[i]);
    sums[i] = dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(s)) : s;
  }
  return sums;
}

TEST(KernelsElementwise, AddInPlaceMatchesTheRoundedSum) {
  LT_REQUIRE_GPU();
  Generator gen(40);
  for (DType dt : kDtypes) {
    for (const Shape& shape : {Shape{7, 13}, Shape{8, 128, 2048}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      Tensor dst = gpu(randn(shape, dt, gen)), src = gpu(randn(shape, dt, gen, 0.3));
      const std::vector<double> expected = rounded_sums(dst, src, dt);
      void* const data = dst.data_ptr();
      ops::add_(dst, src);
      EXPECT_EQ(dst.data_ptr(), data);
      EXPECT_TRUE(dst.device().is_cuda());
      EXPECT_TRUE(testing::all_close(dst.to(Device::cpu()).to_doubles(), expected, 0, 0));
    }
    SCOPED_TRACE(std::string(dtype_name(dt)) + " strided source");
    Tensor dst = gpu(randn({7, 13}, dt, gen));
    Tensor src = gpu(randn({13, 7}, dt, gen)).transpose(0, 1);  // [7, 13], strides (1, 7)
    const std::vector<double> expected = rounded_sums(dst, src, dt);
    ops::add_(dst, src);
    EXPECT_TRUE(testing::all_close(dst.to(Device::cpu()).to_doubles(), expected, 0, 0));
    Tensor stepped = gpu(randn({7, 26}, dt, gen)).slice(1, 0, 26, 2);  // every other column
    const std::vector<double> expected2 = rounded_sums(dst, stepped, dt);
    ops::add_(dst, stepped);
    EXPECT_TRUE(testing::all_close(dst.to(Device::cpu()).to_doubles(), expected2, 0, 0));
  }
  Tensor strided = gpu(randn({13, 7}, DType::F32, gen)).transpose(0, 1);
  EXPECT_THAT(error_of([&] {
                ops::add_(strided, gpu(randn({7, 13}, DType::F32, gen)));
              }),
              ::testing::HasSubstr("the destination must be contiguous"));
}

struct SumCase {
  Shape shape;
  std::vector<int64_t> dims;
  bool keepdim;
};

TEST(KernelsElementwise, SumOverEveryLayout) {
  LT_REQUIRE_GPU();
  Generator gen(5);
  const std::vector<SumCase> cases = {
      {{7, 13}, {1}, false},            // rows (scalar)
      {{7, 13}, {0}, false},            // columns
      {{7, 13}, {0, 1}, false},         // everything
      {{3, 7, 13}, {0, 1}, false},      // leading dims (a bias gradient)
      {{3, 7, 13}, {1}, true},          // a middle dim
      {{3, 7, 13}, {0, 2}, true},       // non-adjacent: the strided path
      {{3, 7, 13}, {}, false},          // nothing reduced
      {{3, 0, 13}, {1}, false},         // an empty sum is 0
      {{8, 128, 2048}, {0, 1}, false},  // realistic bias gradient
      {{8, 128, 2048}, {2}, true},      // realistic rows, packed
      {{8, 128, 2048}, {1}, false},     // realistic middle
  };
  for (DType dt : kDtypes) {
    for (const SumCase& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(c.shape) + " over " +
                   std::to_string(c.dims.size()) + " dims");
      Tensor a = randn(c.shape, dt, gen);
      EXPECT_CLOSE(ops::sum(gpu(a), c.dims, c.keepdim), ops::sum(a, c.dims, c.keepdim), dt);
    }
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = randn({13, 7}, dt, gen);
    // A transposed input takes the strided path.
    EXPECT_CLOSE(ops::sum(gpu(a).transpose(0, 1), {1}), ops::sum(a.transpose(0, 1), {1}), dt);
    EXPECT_CLOSE(ops::sum_all(gpu(a)), ops::sum_all(a), dt);
    Tensor g = randn({8, 128, 2048}, dt, gen);
    EXPECT_CLOSE(ops::sum_to(gpu(g), {2048}), ops::sum_to(g, {2048}), dt);
    EXPECT_CLOSE(ops::sum_to(gpu(g), {1, 128, 2048}), ops::sum_to(g, {1, 128, 2048}), dt);
    // The same sum twice: the same bits (no atomics).
    EXPECT_TRUE(bitwise_equal(ops::sum_to(gpu(g), {2048}), ops::sum_to(gpu(g), {2048})));
  }
}

// ---------------------------------------------------------------- activations

TEST(KernelsActivations, PointwiseForwardAndBackward) {
  LT_REQUIRE_GPU();
  Generator gen(6);
  for (DType dt : kDtypes) {
    for (const Shape& shape : {Shape{7, 13}, Shape{8, 128, 2048}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      Tensor x = randn(shape, dt, gen, 3.0), up = randn(shape, dt, gen), g = randn(shape, dt, gen);
      Tensor gx = gpu(x), gup = gpu(up), gg = gpu(g);
      EXPECT_CLOSE(ops::silu(gx), ops::silu(x), dt);
      EXPECT_CLOSE(ops::silu_backward(gg, gx), ops::silu_backward(g, x), dt);
      EXPECT_CLOSE(ops::gelu_tanh(gx), ops::gelu_tanh(x), dt);
      EXPECT_CLOSE(ops::gelu_tanh_backward(gg, gx), ops::gelu_tanh_backward(g, x), dt);
      EXPECT_CLOSE(ops::swiglu(gx, gup), ops::swiglu(x, up), dt);
      ops::SwigluGrads want = ops::swiglu_backward(g, x, up, true, true);
      ops::SwigluGrads got = ops::swiglu_backward(gg, gx, gup, true, true);
      EXPECT_CLOSE(got.gate, want.gate, dt);
      EXPECT_CLOSE(got.up, want.up, dt);
      ops::SwigluGrads up_only = ops::swiglu_backward(gg, gx, Tensor(), false, true);
      EXPECT_FALSE(up_only.gate.defined());
      EXPECT_CLOSE(up_only.up, want.up, dt);
    }
  }
}

TEST(KernelsActivations, PointwiseOnAStridedView) {
  LT_REQUIRE_GPU();
  Generator gen(7);
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = randn({13, 7}, dt, gen);
    EXPECT_CLOSE(ops::silu(gpu(x).transpose(0, 1)), ops::silu(x.transpose(0, 1)), dt);
  }
}

TEST(KernelsActivations, SoftmaxForwardAndBackward) {
  LT_REQUIRE_GPU();
  Generator gen(8);
  for (DType dt : kDtypes) {
    for (const Shape& shape : {Shape{7, 13}, Shape{5, 1001}, Shape{2, 64, 2048}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      Tensor x = randn(shape, dt, gen, 4.0), g = randn(shape, dt, gen);
      Tensor y = ops::softmax(x);
      Tensor gy = ops::softmax(gpu(x));
      EXPECT_CLOSE(gy, y, dt);
      EXPECT_CLOSE(ops::softmax_backward(gpu(g), gpu(y)), ops::softmax_backward(g, y), dt);
    }
  }
  Tensor x = randn({3, 4}, DType::F32, gen);
  EXPECT_THAT(error_of([&] { ops::softmax(gpu(x), 0); }), ::testing::HasSubstr("last dimension"));
}

// ---------------------------------------------------------------- embedding

Tensor random_ids(const Shape& shape, int64_t vocab, DType dtype, Generator& gen) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  // A small range of ids repeats often, as real text does (several tokens
  // of one row meet in the backward's sum).
  for (double& id : v) id = static_cast<double>(gen.below(gen.uniform() < 0.5 ? 17 : vocab));
  return Tensor::from_doubles(v, shape, dtype);
}

TEST(KernelsEmbedding, LookupAndScatterAdd) {
  LT_REQUIRE_GPU();
  Generator gen(9);
  struct Case {
    Shape ids;
    int64_t vocab, channels;
    DType id_dtype;
  };
  const std::vector<Case> cases = {{{7}, 1001, 13, DType::I64},
                                   {{3, 7}, 1001, 13, DType::I32},
                                   {{8, 128}, 1001, 2048, DType::I64},
                                   {{8, 128}, 151936, 64, DType::I32}};
  for (DType dt : kDtypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " ids " + shape_str(c.ids) + " V " +
                   std::to_string(c.vocab) + " C " + std::to_string(c.channels));
      Tensor w = randn({c.vocab, c.channels}, dt, gen);
      Tensor ids = random_ids(c.ids, c.vocab, c.id_dtype, gen);
      Tensor gw = gpu(w), gids = gpu(ids);
      // The lookup copies rows: bit for bit.
      Tensor y = ops::embedding(gw, gids);
      EXPECT_TRUE(bitwise_equal(y.to(Device::cpu()), ops::embedding(w, ids)));
      Shape gshape = c.ids;
      gshape.push_back(c.channels);
      Tensor g = randn(gshape, dt, gen);
      Tensor dw = ops::embedding_backward(gpu(g), gids, c.vocab);
      EXPECT_CLOSE(dw, ops::embedding_backward(g, ids, c.vocab), dt);
      EXPECT_TRUE(bitwise_equal(dw.to(Device::cpu()),
                                ops::embedding_backward(gpu(g), gids, c.vocab).to(Device::cpu())));
    }
  }
  Tensor w = gpu(randn({10, 4}, DType::F32, gen));
  Tensor bad = gpu(Tensor::from_vector<int64_t>({1, 10}, {2}));
  EXPECT_THAT(error_of([&] { ops::embedding(w, bad); }), ::testing::HasSubstr("id 10"));
}

// A bad id is an error whether the check is made at once (the default) or
// deferred (ops/index_checks.h: the resident executor's step). Deferred, the
// ops return without reading anything back: the good rows are right, the
// bad id's row is zero (forward) or dropped (backward), and the next check
// names the value and the vocabulary size, once.
TEST(KernelsEmbedding, BadIdsAreRecordedOnTheDevice) {
  LT_REQUIRE_GPU();
  Generator gen(16);
  const int64_t vocab = 10, channels = 12;
  Tensor w = randn({vocab, channels}, DType::F32, gen);
  Tensor gw = gpu(w);
  // At once: the backward names the bad id too, and the record is cleared
  // after each error (a good call after it does not throw).
  for (DType id_dtype : {DType::I64, DType::I32}) {
    SCOPED_TRACE(dtype_name(id_dtype));
    Tensor bad = gpu(Tensor::from_doubles({3, -4, 3}, {3}, id_dtype));
    EXPECT_THAT(error_of([&] { ops::embedding(gw, bad); }),
                ::testing::AllOf(::testing::HasSubstr("embedding: id -4"),
                                 ::testing::HasSubstr("[0, 10)")));
    Tensor g3 = gpu(randn({3, channels}, DType::F32, gen));
    EXPECT_THAT(error_of([&] { ops::embedding_backward(g3, bad, vocab); }),
                ::testing::AllOf(::testing::HasSubstr("embedding_backward: id -4"),
                                 ::testing::HasSubstr("[0, 10)")));
    EXPECT_NO_THROW(ops::check_index_errors(kGpu));
    EXPECT_NO_THROW(ops::embedding(gw, gpu(Tensor::from_doubles({9, 0}, {2}, id_dtype))));
  }

  // Outputs with no elements (no width, or no vocabulary) still check ids.
  Tensor one_bad = gpu(Tensor::from_vector<int64_t>({0, 12}, {2}));
  EXPECT_THAT(error_of([&] {
                ops::embedding(gpu(Tensor::zeros({10, 0}, DType::F32)), one_bad);
              }),
              ::testing::HasSubstr("embedding: id 12"));
  EXPECT_THAT(error_of([&] {
                ops::embedding_backward(gpu(Tensor::zeros({2, 0}, DType::F32)), one_bad, vocab);
              }),
              ::testing::HasSubstr("embedding_backward: id 12"));
  EXPECT_THAT(error_of([&] {
                ops::embedding_backward(gpu(Tensor::zeros({1, 4}, DType::F32)),
                                        gpu(Tensor::from_vector<int64_t>({0}, {1})), 0);
              }),
              ::testing::HasSubstr("embedding_backward: id 0 (flat position 0 of the ids) is "
                                   "outside the vocabulary [0, 0)"));

  // Deferred: ids 2, 7, 2, 12 (bad), 5, 2 in a [2, 3] batch.
  Tensor ids = Tensor::from_vector<int64_t>({2, 7, 2, 12, 5, 2}, {2, 3});
  Tensor good = Tensor::from_vector<int64_t>({2, 7, 2, 5, 2}, {5});
  Tensor g = randn({2, 3, channels}, DType::F32, gen);
  Tensor g_good = Tensor::empty({5, channels}, DType::F32);
  const Tensor g_flat = g.reshape({6, channels});
  for (int64_t i = 0, j = 0; i < 6; ++i) {
    if (i == 3) continue;
    g_good.slice(0, j, j + 1).copy_(g_flat.slice(0, i, i + 1));
    ++j;
  }
  Tensor y, dw;
  {
    ops::DeferIndexChecks deferred;
    EXPECT_NO_THROW(y = ops::embedding(gw, gpu(ids)));
    EXPECT_NO_THROW(dw = ops::embedding_backward(gpu(g), gpu(ids), vocab));
    current_stream(kGpu).synchronize();
  }
  std::vector<double> rows = y.reshape({6, channels}).to_doubles();
  const std::vector<double> want = ops::embedding(w, good).to_doubles();
  for (int64_t i = 0, j = 0; i < 6; ++i) {
    for (int64_t c = 0; c < channels; ++c) {
      const double v = rows[static_cast<size_t>(i * channels + c)];
      if (i == 3) {
        EXPECT_EQ(v, 0.0) << "row of the bad id, column " << c;
      } else {
        EXPECT_EQ(v, want[static_cast<size_t>(j * channels + c)]) << "row " << i;
      }
    }
    if (i != 3) ++j;
  }
  // The bad id's gradient row is dropped; the rest is the CPU's sum.
  EXPECT_CLOSE(dw, ops::embedding_backward(g_good, good, vocab), DType::F32);
  // Only the first bad index is kept: the forward's.
  EXPECT_THAT(error_of([&] { ops::check_index_errors(kGpu); }),
              ::testing::AllOf(::testing::HasSubstr("embedding: id 12 (flat position 3"),
                               ::testing::HasSubstr("vocabulary [0, 10)")));
  EXPECT_NO_THROW(ops::check_index_errors(kGpu));

  // A deferred bad id is thrown by the next cross-entropy, which waits for
  // its count anyway (so a bad batch fails before its backward).
  {
    ops::DeferIndexChecks deferred;
    ops::embedding(gw, gpu(ids));
    Tensor logits = gpu(randn({3, vocab}, DType::F32, gen));
    Tensor targets = gpu(Tensor::from_vector<int64_t>({1, -100, 9}, {3}));
    EXPECT_THAT(error_of([&] { ops::cross_entropy(logits, targets); }),
                ::testing::HasSubstr("embedding: id 12"));
    ops::CrossEntropyOutput ok = ops::cross_entropy(logits, targets);
    EXPECT_EQ(ok.count, 2);
  }
  EXPECT_NO_THROW(ops::check_index_errors(kGpu));
}

// ---------------------------------------------------------------- norms

const std::vector<Shape> kNormShapes = {{7, 13}, {8, 128, 2048}};

TEST(KernelsNorm, RmsNormForwardAndBackward) {
  LT_REQUIRE_GPU();
  Generator gen(10);
  for (DType dt : kDtypes) {
    for (const Shape& shape : kNormShapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      const int64_t C = shape.back();
      Tensor x = randn(shape, dt, gen, 2.0), dy = randn(shape, dt, gen);
      Tensor w = Tensor::uniform({C}, gen, 0.5, 1.5, dt);
      ops::RmsNormOutput want = ops::rms_norm(x, w, 1e-6);
      ops::RmsNormOutput got = ops::rms_norm(gpu(x), gpu(w), 1e-6);
      EXPECT_CLOSE(got.y, want.y, dt);
      EXPECT_CLOSE(got.rstd, want.rstd, DType::F32);
      ops::RmsNormGrads gw = ops::rms_norm_backward(dy, x, w, want.rstd, true, true);
      ops::RmsNormGrads gg = ops::rms_norm_backward(gpu(dy), gpu(x), gpu(w), got.rstd, true, true);
      EXPECT_CLOSE(gg.dx, gw.dx, dt);
      EXPECT_CLOSE(gg.dweight, gw.dweight, dt);
      ops::RmsNormGrads again =
          ops::rms_norm_backward(gpu(dy), gpu(x), gpu(w), got.rstd, false, true);
      EXPECT_FALSE(again.dx.defined());
      EXPECT_TRUE(bitwise_equal(again.dweight.to(Device::cpu()), gg.dweight.to(Device::cpu())));
    }
  }
}

TEST(KernelsNorm, RmsNormBf16RoundsLikeHuggingFace) {
  LT_REQUIRE_GPU();
  // The normalized x is rounded to bf16 before the weight multiply; with
  // the same f32 statistics the two backends then agree bit for bit on
  // almost every element (the f32 sums differ only in order).
  Generator gen(11);
  Tensor x = randn({64, 256}, DType::BF16, gen, 2.0);
  Tensor w = Tensor::uniform({256}, gen, 0.5, 1.5, DType::BF16);
  std::vector<double> want = ops::rms_norm(x, w, 1e-6).y.to_doubles();
  std::vector<double> got = ops::rms_norm(gpu(x), gpu(w), 1e-6).y.to_doubles();
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) differ += want[i] != got[i];
  EXPECT_LT(differ, want.size() / 100) << differ << " of " << want.size() << " differ";
}

TEST(KernelsNorm, LayerNormForwardAndBackward) {
  LT_REQUIRE_GPU();
  Generator gen(12);
  for (DType dt : kDtypes) {
    for (const Shape& shape : kNormShapes) {
      for (bool affine : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape) +
                     (affine ? " affine" : " plain"));
        const int64_t C = shape.back();
        // An offset mean: the two-pass variance must not cancel.
        Tensor x = ops::add(randn(shape, dt, gen, 2.0), Tensor::full({C}, 3.0, dt));
        Tensor dy = randn(shape, dt, gen);
        Tensor w = affine ? Tensor::uniform({C}, gen, 0.5, 1.5, dt) : Tensor();
        Tensor b = affine ? randn({C}, dt, gen) : Tensor();
        Tensor gw = affine ? gpu(w) : Tensor(), gb = affine ? gpu(b) : Tensor();
        ops::LayerNormOutput want = ops::layer_norm(x, w, b, 1e-5);
        ops::LayerNormOutput got = ops::layer_norm(gpu(x), gw, gb, 1e-5);
        EXPECT_CLOSE(got.y, want.y, dt);
        EXPECT_CLOSE(got.mean, want.mean, DType::F32);
        EXPECT_CLOSE(got.rstd, want.rstd, DType::F32);
        ops::LayerNormGrads gr_want =
            ops::layer_norm_backward(dy, x, w, want.mean, want.rstd, true, affine, true);
        ops::LayerNormGrads gr_got =
            ops::layer_norm_backward(gpu(dy), gpu(x), gw, got.mean, got.rstd, true, affine, true);
        EXPECT_CLOSE(gr_got.dx, gr_want.dx, dt);
        if (affine) {
          EXPECT_CLOSE(gr_got.dweight, gr_want.dweight, dt);
        }
        EXPECT_CLOSE(gr_got.dbias, gr_want.dbias, dt);
      }
    }
  }
}

// ---------------------------------------------------------------- rope

TEST(KernelsRope, RotaryForwardAndBackward) {
  LT_REQUIRE_GPU();
  Generator gen(13);
  struct Case {
    Shape x;
    bool positions, per_batch;
  };
  const std::vector<Case> cases = {
      {{2, 7, 3, 6}, false, false},       // half 3: the scalar path
      {{2, 7, 3, 16}, true, false},       // half 8: packed, positions [T]
      {{2, 7, 3, 16}, true, true},        // positions [B, T]
      {{8, 128, 16, 128}, false, false},  // realistic
  };
  for (DType dt : kDtypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(c.x) +
                   (c.positions ? (c.per_batch ? " pos [B, T]" : " pos [T]") : ""));
      const int64_t B = c.x[0], T = c.x[1], D = c.x[3];
      ops::RopeCosSin table = ops::rope_cos_sin(ops::rope_inv_freq(D, 10000.0), 300);
      Tensor pos;
      if (c.positions) {
        Shape ps = c.per_batch ? Shape{B, T} : Shape{T};
        std::vector<double> v(static_cast<size_t>(numel(ps)));
        for (double& p : v) p = static_cast<double>(gen.below(300));
        pos = Tensor::from_doubles(v, ps, c.per_batch ? DType::I32 : DType::I64);
      }
      Tensor gpos = pos.defined() ? gpu(pos) : Tensor();
      Tensor gcos = gpu(table.cos), gsin = gpu(table.sin);
      Tensor x = randn(c.x, dt, gen), g = randn(c.x, dt, gen);
      EXPECT_CLOSE(ops::rotary(gpu(x), gcos, gsin, gpos), ops::rotary(x, table.cos, table.sin, pos),
                   dt);
      EXPECT_CLOSE(ops::rotary_backward(gpu(g), gcos, gsin, gpos),
                   ops::rotary_backward(g, table.cos, table.sin, pos), dt);
      // f32 tables too.
      EXPECT_CLOSE(
          ops::rotary(gpu(x), gpu(table.cos.to(DType::F32)), gpu(table.sin.to(DType::F32)), gpos),
          ops::rotary(x, table.cos, table.sin, pos), dt);
    }
  }
  ops::RopeCosSin table = ops::rope_cos_sin(ops::rope_inv_freq(4, 10000.0), 8);
  Tensor x = gpu(randn({1, 2, 1, 4}, DType::F32, gen));
  Tensor bad = gpu(Tensor::from_vector<int64_t>({0, 8}, {2}));
  EXPECT_THAT(error_of([&] { ops::rotary(x, gpu(table.cos), gpu(table.sin), bad); }),
              ::testing::HasSubstr("position 8"));
}

// ---------------------------------------------------------------- cross-entropy

Tensor random_targets(int64_t n, int64_t vocab, DType dtype, Generator& gen, double ignored) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& t : v) {
    t = gen.uniform() < ignored ? -100.0 : static_cast<double>(gen.below(vocab));
  }
  return Tensor::from_doubles(v, {n}, dtype);
}

TEST(KernelsCrossEntropy, ForwardAndBackward) {
  LT_REQUIRE_GPU();
  Generator gen(14);
  struct Case {
    int64_t rows, vocab;
    DType target_dtype;
  };
  // 128 rows of the Qwen vocabulary: about one lm_head_loss chunk.
  const std::vector<Case> cases = {{7, 1001, DType::I64}, {128, 151936, DType::I32}};
  for (DType dt : kDtypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " [" + std::to_string(c.rows) + ", " +
                   std::to_string(c.vocab) + "]");
      Tensor logits = randn({c.rows, c.vocab}, dt, gen, 3.0);
      Tensor targets = random_targets(c.rows, c.vocab, c.target_dtype, gen, 0.2);
      Tensor gl = gpu(logits), gt = gpu(targets);
      ops::CrossEntropyOutput want = ops::cross_entropy(logits, targets);
      ops::CrossEntropyOutput got = ops::cross_entropy(gl, gt);
      EXPECT_EQ(got.count, want.count);
      // The loss and lse are f32 whatever the logits: f32 tolerance.
      EXPECT_CLOSE(got.loss, want.loss, DType::F32);
      EXPECT_CLOSE(got.lse, want.lse, DType::F32);
      Tensor scale = Tensor::scalar(1.7, DType::F64);
      Tensor gwant =
          ops::cross_entropy_backward(scale, logits, targets, want.lse, -100, want.count);
      // grad_loss on the host (as lm_head_loss passes it) and on the device.
      EXPECT_CLOSE(ops::cross_entropy_backward(scale, gl, gt, got.lse, -100, got.count), gwant, dt);
      EXPECT_CLOSE(ops::cross_entropy_backward(gpu(Tensor::scalar(1.7, DType::F32)), gl, gt,
                                               got.lse, -100, got.count),
                   gwant, dt);
    }
  }
}

TEST(KernelsCrossEntropy, AllIgnoredAndBadTargets) {
  LT_REQUIRE_GPU();
  Generator gen(15);
  Tensor logits = gpu(randn({3, 11}, DType::BF16, gen));
  Tensor ignored = gpu(Tensor::from_vector<int64_t>({-100, -100, -100}, {3}));
  ops::CrossEntropyOutput out = ops::cross_entropy(logits, ignored);
  EXPECT_EQ(out.count, 0);
  EXPECT_EQ(out.loss.item(), 0.0);
  Tensor g = ops::cross_entropy_backward(Tensor::scalar(1.0), logits, ignored, out.lse, -100, 0);
  for (double v : g.to_doubles()) EXPECT_EQ(v, 0.0);
  Tensor bad = gpu(Tensor::from_vector<int32_t>({0, 11, 2}, {3}));
  EXPECT_THAT(error_of([&] { ops::cross_entropy(logits, bad); }),
              ::testing::HasSubstr("target 11 at row 1"));
  // The same inside a deferred scope (the cross-entropy waits for its
  // count anyway), with the vocabulary and ignore_index named; a negative
  // target that is not ignore_index is bad too. Each error clears the record.
  ops::DeferIndexChecks deferred;
  Tensor negative = gpu(Tensor::from_vector<int64_t>({0, -100, -3}, {3}));
  EXPECT_THAT(error_of([&] { ops::cross_entropy(logits, negative); }),
              ::testing::HasSubstr("target -3 at row 2 is outside the vocabulary [0, 11) and is "
                                   "not ignore_index (-100)"));
  EXPECT_NO_THROW(ops::check_index_errors(kGpu));
  EXPECT_EQ(ops::cross_entropy(logits, gpu(Tensor::from_vector<int64_t>({0, -100, 10}, {3}))).count,
            2);
}

// The float64 gradient of the mean cross-entropy, times grad_loss.
std::vector<double> ce_grad_f64(const std::vector<double>& x, const std::vector<int64_t>& targets,
                                int64_t V, double grad_loss) {
  std::vector<double> g = testing::cross_entropy_f64(x, targets, V, -100).grad;
  for (double& v : g) v *= grad_loss;
  return g;
}

// The gradient written over the logits on the GPU. Each target logit is
// raised by log(vocab) + 2, so the target's softmax p is near 0.8 and its gradient
// (p - 1) s clearly differs from the -s that a one-hot term computed from
// the already overwritten target element would give.
TEST(KernelsCrossEntropy, BackwardInPlaceMatchesTheFloat64Formula) {
  LT_REQUIRE_GPU();
  Generator gen(41);
  const int64_t rows = 7;
  for (DType dt : kDtypes) {
    for (int64_t vocab : {int64_t{67}, int64_t{1001}, int64_t{4096}}) {  // 4096: packed path
      SCOPED_TRACE(std::string(dtype_name(dt)) + " vocab " + std::to_string(vocab));
      std::vector<int64_t> tv(rows);
      for (int64_t r = 0; r < rows; ++r) tv[r] = static_cast<int64_t>(gen.below(vocab));
      tv[2] = -100;
      tv[rows - 1] = vocab - 1;  // the last element of a row: the scalar tail
      std::vector<double> x = Tensor::randn({rows, vocab}, gen, DType::F64).to_doubles();
      for (int64_t r = 0; r < rows; ++r) {
        if (tv[r] >= 0) x[r * vocab + tv[r]] += std::log(static_cast<double>(vocab)) + 2.0;
      }
      Tensor logits = gpu(Tensor::from_doubles(x, {rows, vocab}, dt));
      Tensor targets = gpu(Tensor::from_vector<int64_t>(tv, {rows}));
      // The reference from the values the kernel reads (rounded to dt).
      const double grad_loss = 1.7;
      const std::vector<double> want =
          ce_grad_f64(logits.to(Device::cpu()).to_doubles(), tv, vocab, grad_loss);
      ops::CrossEntropyOutput out = ops::cross_entropy(logits, targets);
      ASSERT_EQ(out.count, rows - 1);
      void* const data = logits.data_ptr();
      ops::cross_entropy_backward_(Tensor::scalar(grad_loss, DType::F64), logits, targets, out.lse,
                                   -100, out.count);
      EXPECT_EQ(logits.data_ptr(), data);
      EXPECT_EQ(logits.dtype(), dt);
      const std::vector<double> got = logits.to(Device::cpu()).to_doubles();
      const double s = grad_loss / static_cast<double>(rows - 1);
      // f32: the fast exp's few ulps; bf16: that and one rounding (half a step).
      const double rtol = dt == DType::BF16 ? 0x1p-8 * 1.01 : 1e-5;
      EXPECT_TRUE(testing::all_close(got, want, 1e-6 * s, rtol));
      for (int64_t j = 0; j < vocab; ++j) EXPECT_EQ(got[2 * vocab + j], 0.0) << j;
      for (int64_t r = 0; r < rows; ++r) {
        if (tv[r] < 0) continue;
        const double target_grad = want[r * vocab + tv[r]];
        ASSERT_GT(target_grad, -0.9 * s);  // p > 0.1
        EXPECT_NEAR(got[r * vocab + tv[r]], target_grad, 1e-6 * s + rtol * std::abs(target_grad))
            << "row " << r;
      }
    }
  }
  Tensor strided = gpu(randn({13, 5}, DType::F32, gen)).transpose(0, 1);
  Tensor targets = gpu(Tensor::from_vector<int64_t>({0, -100, 3, 12, 1}, {5}));
  ops::CrossEntropyOutput out = ops::cross_entropy(strided, targets);
  EXPECT_THAT(error_of([&] {
                ops::cross_entropy_backward_(Tensor::scalar(1.0, DType::F64), strided, targets,
                                             out.lse, -100, out.count);
              }),
              ::testing::HasSubstr("the logits must be contiguous"));
}

// ---------------------------------------------------------------- autograd

// The ops chained through autograd, as a model uses them: an embedding
// plus a broadcast position table, RMSNorm, RoPE, SwiGLU, cross-entropy.
// The gradients reach the leaves through the engine's accumulation (add)
// and broadcasting's reduction (sum_to) on the GPU as on the CPU.
struct ChainGrads {
  Tensor loss, table, pos, norm;
};

ChainGrads run_chain(Device device, DType dt, uint64_t seed) {
  Generator gen(seed);
  const int64_t B = 2, T = 7, H = 2, D = 8, C = H * D, V = 1001;
  auto leaf = [&](Tensor t) { return t.to(device).set_requires_grad(true); };
  Tensor table = leaf(randn({V, C}, dt, gen));
  Tensor pos = leaf(randn({T, C}, dt, gen, 0.1));
  Tensor norm_w = leaf(Tensor::uniform({C}, gen, 0.5, 1.5, dt));
  Tensor ids = random_ids({B, T}, V, DType::I64, gen).to(device);
  Tensor targets = random_targets(B * T, C, DType::I64, gen, 0.1).to(device);
  ops::RopeCosSin cs = ops::rope_cos_sin(ops::rope_inv_freq(D, 10000.0), T);
  RopeTable rope{cs.cos.to(device), cs.sin.to(device), D};
  Tensor h = add(embedding(table, ids), pos);
  Tensor n = rms_norm(h, norm_w, 1e-6);
  Tensor r = reshape(rotary_embedding(reshape(n, {B, T, H, D}), rope), {B, T, C});
  Tensor a = swiglu(r, n);
  Tensor loss = cross_entropy(reshape(a, {B * T, C}), targets);
  backward(loss);
  return {loss.detach(), table.grad(), pos.grad(), norm_w.grad()};
}

TEST(KernelsAutograd, ChainedOpsGiveTheCpuGradients) {
  LT_REQUIRE_GPU();
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    ChainGrads want = run_chain(Device::cpu(), dt, 18);
    ChainGrads got = run_chain(kGpu, dt, 18);
    EXPECT_CLOSE(got.loss, want.loss, DType::F32);
    EXPECT_CLOSE(got.table, want.table, dt);
    EXPECT_CLOSE(got.pos, want.pos, dt);
    EXPECT_CLOSE(got.norm, want.norm, dt);
  }
}

// ---------------------------------------------------------------- streams

TEST(KernelsStreams, KernelsRunOnTheCurrentStream) {
  LT_REQUIRE_GPU();
  // Work on a non-blocking stream, read back through copies ordered after
  // that stream: the results must be those of the default stream.
  Generator gen(16);
  Tensor x = randn({8, 128, 2048}, DType::BF16, gen);
  Tensor w = Tensor::uniform({2048}, gen, 0.5, 1.5, DType::BF16);
  Tensor want = ops::rms_norm(x, w, 1e-6).y;
  Stream side = Stream::create(kGpu);
  StreamGuard guard(side);
  Tensor got = ops::rms_norm(gpu(x), gpu(w), 1e-6).y;
  side.synchronize();
  EXPECT_CLOSE(got, want, DType::BF16);
}

// ---------------------------------------------------------------- bandwidth

// Not a test: the achieved memory bandwidth of each kernel at the model's
// shapes (bf16, 8 x 128 tokens, hidden 2048, vocabulary 151936), against
// the H200's 4.8 TB/s HBM peak. Run with --gtest_also_run_disabled_tests.
// Times come from CUDA events around `kReps` calls (median of 5 batches);
// ops that read ids or targets back to check them include that round trip.
TEST(KernelsBandwidth, DISABLED_Report) {
  LT_REQUIRE_GPU();
  constexpr int kReps = 20;
  constexpr double kPeakBytesPerS = 4.8e12;
  Generator gen(17);
  const DType bf = DType::BF16;
  const int64_t N = 8 * 128, C = 2048, V = 151936;
  Tensor x = gpu(randn({8, 128, C}, bf, gen)), y = gpu(randn({8, 128, C}, bf, gen));
  Tensor g = gpu(randn({8, 128, C}, bf, gen)), w = gpu(Tensor::uniform({C}, gen, 0.5, 1.5, bf));
  Tensor b = gpu(randn({C}, bf, gen));
  Tensor q = gpu(randn({8, 128, 16, 128}, bf, gen));
  ops::RopeCosSin table = ops::rope_cos_sin(ops::rope_inv_freq(128, 1e6), 4096);
  Tensor cos = gpu(table.cos), sin = gpu(table.sin);
  Tensor table_w = gpu(randn({V, C}, bf, gen, 0.02));
  Tensor ids = gpu(random_ids({8, 128}, V, DType::I64, gen));
  Tensor logits = gpu(randn({N, V}, bf, gen, 3.0));
  Tensor targets = gpu(random_targets(N, V, DType::I64, gen, 0.0));
  ops::RmsNormOutput rms = ops::rms_norm(x, w, 1e-6);
  ops::LayerNormOutput ln = ops::layer_norm(x, w, b, 1e-5);
  ops::CrossEntropyOutput ce = ops::cross_entropy(logits, targets);
  const double act = static_cast<double>(x.nbytes());  // one [8, 128, 2048] bf16 tensor
  const double lg = static_cast<double>(logits.nbytes());
  struct Row {
    const char* name;
    double bytes;  // the floor: each input read once, each output written once
    std::function<void()> fn;
  };
  const std::vector<Row> rows = {
      {"add (same shape)", 3 * act, [&] { ops::add(x, y); }},
      {"add (bias [C])", 2 * act, [&] { ops::add(x, b); }},
      {"scale", 2 * act, [&] { ops::scale(x, 0.5); }},
      {"sum_to [C]", act, [&] { ops::sum_to(g, {C}); }},
      {"silu", 2 * act, [&] { ops::silu(x); }},
      {"gelu_tanh", 2 * act, [&] { ops::gelu_tanh(x); }},
      {"swiglu", 3 * act, [&] { ops::swiglu(x, y); }},
      {"swiglu_backward", 5 * act, [&] { ops::swiglu_backward(g, x, y, true, true); }},
      {"softmax [1024, 2048]", 2 * act, [&] { ops::softmax(x); }},
      {"rms_norm", 2 * act, [&] { ops::rms_norm(x, w, 1e-6); }},
      {"rms_norm_backward", 3 * act,
       [&] { ops::rms_norm_backward(g, x, w, rms.rstd, true, true); }},
      {"layer_norm", 2 * act, [&] { ops::layer_norm(x, w, b, 1e-5); }},
      {"layer_norm_backward", 3 * act,
       [&] { ops::layer_norm_backward(g, x, w, ln.mean, ln.rstd, true, true, true); }},
      {"rotary [8,128,16,128]", 2 * act, [&] { ops::rotary(q, cos, sin); }},
      {"embedding", act, [&] { ops::embedding(table_w, ids); }},
      {"embedding_backward (V=151936)", act + static_cast<double>(table_w.nbytes()),
       [&] { ops::embedding_backward(x, ids, V); }},
      {"cross_entropy [1024, 151936]", lg, [&] { ops::cross_entropy(logits, targets); }},
      {"cross_entropy_backward", 2 * lg,
       [&] {
         ops::cross_entropy_backward(Tensor::scalar(1.0), logits, targets, ce.lse, -100, ce.count);
       }},
  };
  const Stream stream = current_stream(kGpu);
  std::printf("%-32s %10s %10s %8s\n", "kernel", "us", "GB/s", "of peak");
  for (const Row& row : rows) {
    row.fn();  // warm up: caches, allocator
    std::vector<double> us;
    for (int batch = 0; batch < 5; ++batch) {
      Event start(true), end(true);
      start.record(stream);
      for (int i = 0; i < kReps; ++i) row.fn();
      end.record(stream);
      end.synchronize();
      us.push_back(1e3 * start.elapsed_ms(end) / kReps);
    }
    std::sort(us.begin(), us.end());
    const double t = us[us.size() / 2];
    std::printf("%-32s %10.1f %10.0f %7.0f%%\n", row.name, t, row.bytes / t * 1e-3,
                100 * row.bytes / (t * 1e-6) / kPeakBytesPerS);
  }
}

}  // namespace
}  // namespace lt
