// CUDA causal attention against the CPU backend (ops/attention.cpp): the
// same random q, k, v and output gradient on both devices (the GPU copies
// are made from the CPU tensors, so bf16 inputs are the same bits), and the
// output, lse, dq, dk and dv must agree as relative error norms
// ||gpu - cpu|| / ||cpu|| within 1e-2 for bf16 and 1e-3 for f32 (issue 6).
// bf16 with head_dim 64/128 runs the flash kernels; f32 and other head
// sizes run the row kernels. Each backend's backward consumes its own
// forward's out and lse, as training does.
//
// AttentionCudnn runs the same comparison on cuDNN's fused attention
// (ops/cuda/attention_cudnn.h) and checks which path ran; it also mixes a
// cuDNN forward with the own backward and the reverse, which is sound only
// if both produce the same lse.
//
// AttentionBench (LT_BENCH=1 only) times the own flash kernels and cuDNN at
// seq 2048, head_dim 128, 16/2 heads and prints TFLOP/s counted as
// FlashAttention does for causal attention: forward 4 B H T^2 D / 2,
// backward 2.5 times that.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "core/cuda/device_info.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/elementwise.h"
#include "support/errors.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::error_of;
using testing::relative_error_norm;

#define LT_REQUIRE_GPU() \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU on this machine"

const Device kGpu = Device::cuda(0);

double tolerance(DType t) {
  return t == DType::BF16 ? 1e-2 : 1e-3;
}

// The GPU result against the CPU one: same shape and dtype, relative error
// norm below `tol`. LT_KERNEL_ERRORS=1 prints every measured error.
::testing::AssertionResult close(const char* what, const Tensor& actual, const Tensor& expected,
                                 double tol) {
  if (!actual.device().is_cuda()) {
    return ::testing::AssertionFailure() << what << " not on the GPU: " << actual.str();
  }
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure()
           << what << ": " << actual.str() << " vs " << expected.str();
  }
  const double err = relative_error_norm(actual.to_doubles(), expected.to_doubles());
  if (std::getenv("LT_KERNEL_ERRORS")) {
    std::printf("[rel-err] attention %s %s %.3e %s\n", what, dtype_name(actual.dtype()), err,
                actual.str().c_str());
  }
  if (!(err < tol)) {  // NaN fails too
    return ::testing::AssertionFailure()
           << what << ": relative error norm " << err << " >= " << tol << " for " << actual.str();
  }
  return ::testing::AssertionSuccess();
}

using ops::cuda::AttentionPath;

const char* path_name(AttentionPath p) {
  switch (p) {
    case AttentionPath::kCudnn:
      return "cudnn";
    case AttentionPath::kFlash:
      return "flash";
    case AttentionPath::kRows:
      return "rows";
    default:
      return "none";
  }
}

// Sets LT_ATTENTION for one scope (ops/cuda/attention.h reads it per call).
class AttentionMode {
 public:
  explicit AttentionMode(const char* mode) {
    const char* old = std::getenv("LT_ATTENTION");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("LT_ATTENTION", mode, 1);
  }
  ~AttentionMode() {
    if (had_) {
      setenv("LT_ATTENTION", old_.c_str(), 1);
    } else {
      unsetenv("LT_ATTENTION");
    }
  }
  AttentionMode(const AttentionMode&) = delete;
  AttentionMode& operator=(const AttentionMode&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

struct Case {
  int64_t batch, seq, q_heads, kv_heads, head_dim;
  DType dtype;
  std::string str() const {
    return std::string(dtype_name(dtype)) + " B=" + std::to_string(batch) +
           " T=" + std::to_string(seq) + " Hq=" + std::to_string(q_heads) +
           " Hkv=" + std::to_string(kv_heads) + " D=" + std::to_string(head_dim);
  }
};

struct Inputs {
  Tensor q, k, v, dout;
};

Inputs random_inputs(const Case& c, uint64_t seed) {
  Generator gen(seed);
  return {Tensor::randn({c.batch, c.seq, c.q_heads, c.head_dim}, gen, c.dtype),
          Tensor::randn({c.batch, c.seq, c.kv_heads, c.head_dim}, gen, c.dtype),
          Tensor::randn({c.batch, c.seq, c.kv_heads, c.head_dim}, gen, c.dtype),
          Tensor::randn({c.batch, c.seq, c.q_heads, c.head_dim}, gen, c.dtype)};
}

void expect_grads_close(const ops::AttentionGrads& got, const ops::AttentionGrads& want,
                        double tol) {
  EXPECT_TRUE(close("dq", got.dq, want.dq, tol));
  EXPECT_TRUE(close("dk", got.dk, want.dk, tol));
  EXPECT_TRUE(close("dv", got.dv, want.dv, tol));
}

// Forward and backward on both devices; every result within tolerance.
void expect_matches_cpu(const Case& c, const Inputs& in, const Inputs& gpu_in) {
  SCOPED_TRACE(c.str());
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const double tol = tolerance(c.dtype);
  const ops::AttentionForward want = ops::causal_attention_forward(in.q, in.k, in.v, scale);
  const ops::AttentionForward got =
      ops::causal_attention_forward(gpu_in.q, gpu_in.k, gpu_in.v, scale);
  EXPECT_TRUE(close("out", got.out, want.out, tol));
  // The CPU keeps lse in the compute type (f32 for bf16 and f32 inputs).
  EXPECT_TRUE(close("lse", got.lse, want.lse, tol));
  const ops::AttentionGrads gw =
      ops::causal_attention_backward(in.dout, in.q, in.k, in.v, want.out, want.lse, scale);
  const ops::AttentionGrads gg = ops::causal_attention_backward(gpu_in.dout, gpu_in.q, gpu_in.k,
                                                                gpu_in.v, got.out, got.lse, scale);
  expect_grads_close(gg, gw, tol);
}

Inputs to_gpu(const Inputs& in) {
  return {in.q.to(kGpu), in.k.to(kGpu), in.v.to(kGpu), in.dout.to(kGpu)};
}

// The issue's grid on the own kernels: T = 1 (one key), 17 (a tail in the first block), 128
// (whole blocks) and 300 (several blocks and a tail); plain and 4:1 grouped
// heads; both flash head sizes; both dtypes.
TEST(AttentionGpu, MatchesCpuOnTheIssueShapes) {
  LT_REQUIRE_GPU();
  // The own kernels, which are the fallback of cuDNN (AttentionCudnn below).
  const AttentionMode own("own");
  uint64_t seed = 600;
  for (DType dt : {DType::BF16, DType::F32}) {
    for (int64_t d : {64, 128}) {
      for (auto heads : {std::pair<int64_t, int64_t>{4, 4}, {8, 2}}) {
        for (int64_t t : {1, 17, 128, 300}) {
          const Case c{2, t, heads.first, heads.second, d, dt};
          const Inputs in = random_inputs(c, ++seed);
          expect_matches_cpu(c, in, to_gpu(in));
        }
      }
    }
  }
}

// Head sizes the flash kernels do not take run on the row kernels in both
// dtypes: 40 (not a multiple of 32 lanes) and 256 (the row kernels' limit).
TEST(AttentionGpu, OtherHeadSizesMatchCpu) {
  LT_REQUIRE_GPU();
  uint64_t seed = 700;
  for (DType dt : {DType::BF16, DType::F32}) {
    for (int64_t d : {40, 256}) {
      const Case c{1, 33, 6, 2, d, dt};
      const Inputs in = random_inputs(c, ++seed);
      expect_matches_cpu(c, in, to_gpu(in));
    }
  }
}

// q, k and v as strided views of one fused [B, T, Hq + 2 Hkv, D] projection
// (how a model hands them over), and a large softmax scale that makes the
// probabilities peaked (the running max matters).
TEST(AttentionGpu, StridedViewsAndPeakedSoftmax) {
  LT_REQUIRE_GPU();
  const Case c{2, 200, 8, 2, 128, DType::BF16};
  Generator gen(801);
  const Tensor qkv =
      Tensor::randn({c.batch, c.seq, c.q_heads + 2 * c.kv_heads, c.head_dim}, gen, c.dtype, 3.0);
  const Tensor dout = Tensor::randn({c.batch, c.seq, c.q_heads, c.head_dim}, gen, c.dtype);
  auto split = [&](const Tensor& t) {
    return Inputs{t.slice(2, 0, c.q_heads), t.slice(2, c.q_heads, c.q_heads + c.kv_heads),
                  t.slice(2, c.q_heads + c.kv_heads, c.q_heads + 2 * c.kv_heads), Tensor()};
  };
  Inputs in = split(qkv);
  in.dout = dout;
  Inputs gin = split(qkv.to(kGpu));
  gin.dout = dout.to(kGpu);
  ASSERT_FALSE(gin.q.is_contiguous());
  expect_matches_cpu(c, in, gin);
}

// Through autograd: lt::causal_attention records the node and its backward
// reaches the CUDA kernels; gradients match the CPU graph's.
TEST(AttentionGpu, AutogradMatchesCpu) {
  LT_REQUIRE_GPU();
  const Case c{1, 70, 4, 2, 64, DType::BF16};
  const Inputs in = random_inputs(c, 901);
  auto grads = [&](const Inputs& x) {
    Tensor q = x.q.detach(), k = x.k.detach(), v = x.v.detach();
    q.set_requires_grad(true);
    k.set_requires_grad(true);
    v.set_requires_grad(true);
    Tensor out = causal_attention(q, k, v);
    backward(out, x.dout);
    return std::vector<Tensor>{out.detach(), q.grad(), k.grad(), v.grad()};
  };
  const std::vector<Tensor> want = grads(in), got = grads(to_gpu(in));
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(close(names[i], got[i], want[i], 1e-2));
}

// The comparison can fail: a CPU result perturbed by twice the tolerance
// is refused.
TEST(AttentionGpu, HarnessRefusesAPerturbedReference) {
  LT_REQUIRE_GPU();
  const Case c{1, 50, 4, 2, 128, DType::BF16};
  const Inputs in = random_inputs(c, 950);
  const Inputs gin = to_gpu(in);
  const Tensor want = ops::causal_attention_forward(in.q, in.k, in.v, 0.125).out;
  const Tensor got = ops::causal_attention_forward(gin.q, gin.k, gin.v, 0.125).out;
  EXPECT_TRUE(close("out", got, want, 1e-2));
  EXPECT_FALSE(close("out", got, ops::scale(want, 1.02), 1e-2));
}

TEST(AttentionGpu, RefusesWhatHasNoKernel) {
  LT_REQUIRE_GPU();
  const Tensor f64 = Tensor::empty({1, 4, 2, 64}, DType::F64, kGpu);
  EXPECT_THAT(error_of([&] { ops::causal_attention_forward(f64, f64, f64, 0.1); }),
              ::testing::HasSubstr("f32 or bf16"));
  const Tensor wide = Tensor::empty({1, 4, 2, 264}, DType::F32, kGpu);
  EXPECT_THAT(error_of([&] { ops::causal_attention_forward(wide, wide, wide, 0.1); }),
              ::testing::HasSubstr("head_dim 264"));
}

// ---------------------------------------------------------------- cuDNN

#define LT_REQUIRE_CUDNN() \
  LT_REQUIRE_GPU();        \
  if (ops::cuda::cudnn_attn::runtime_version() == 0) GTEST_SKIP() << "this build has no cuDNN"

ops::cuda::cudnn_attn::Problem problem_of(const Case& c) {
  return {c.batch,    c.seq,      c.q_heads,
          c.kv_heads, c.head_dim, 1.0 / std::sqrt(static_cast<double>(c.head_dim)),
          0};
}

// bf16 GQA and MHA, both head sizes, whole 128-blocks and lengths that are
// not multiples of 64: the forward must run on cuDNN; the backward on
// cuDNN where it supports the length, else on the flash kernels.
TEST(AttentionCudnn, MatchesCpuAndTakesTheExpectedPath) {
  LT_REQUIRE_CUDNN();
  std::printf("cuDNN %lld\n", static_cast<long long>(ops::cuda::cudnn_attn::runtime_version()));
  const AttentionMode mode("auto");
  uint64_t seed = 1600;
  for (int64_t d : {64, 128}) {
    for (auto heads : {std::pair<int64_t, int64_t>{4, 4}, {8, 2}}) {
      for (int64_t t : {128, 256, 17, 300}) {
        const Case c{2, t, heads.first, heads.second, d, DType::BF16};
        SCOPED_TRACE(c.str());
        const Inputs in = random_inputs(c, ++seed);
        const Inputs gin = to_gpu(in);
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const auto want = ops::causal_attention_forward(in.q, in.k, in.v, scale);
        const auto got = ops::causal_attention_forward(gin.q, gin.k, gin.v, scale);
        EXPECT_EQ(path_name(ops::cuda::last_forward_path()), std::string("cudnn"));
        EXPECT_TRUE(close("out", got.out, want.out, 1e-2));
        EXPECT_TRUE(close("lse", got.lse, want.lse, 1e-2));
        const auto gw =
            ops::causal_attention_backward(in.dout, in.q, in.k, in.v, want.out, want.lse, scale);
        const auto gg =
            ops::causal_attention_backward(gin.dout, gin.q, gin.k, gin.v, got.out, got.lse, scale);
        const bool cudnn_bwd =
            ops::cuda::cudnn_attn::unsupported_reason(problem_of(c), true).empty();
        EXPECT_EQ(path_name(ops::cuda::last_backward_path()),
                  std::string(cudnn_bwd ? "cudnn" : "flash"));
        expect_grads_close(gg, gw, 1e-2);
      }
    }
  }
}

// The lse of either forward feeds either backward: cuDNN forward + own
// backward, own forward + cuDNN backward, both against the CPU.
TEST(AttentionCudnn, ForwardAndBackwardPathsMix) {
  LT_REQUIRE_CUDNN();
  const Case c{2, 256, 8, 2, 128, DType::BF16};
  const Inputs in = random_inputs(c, 1700);
  const Inputs gin = to_gpu(in);
  const double scale = 1.0 / std::sqrt(128.0);
  const auto want = ops::causal_attention_forward(in.q, in.k, in.v, scale);
  const auto gw =
      ops::causal_attention_backward(in.dout, in.q, in.k, in.v, want.out, want.lse, scale);
  for (auto paths : {std::pair<const char*, const char*>{"cudnn", "own"}, {"own", "cudnn"}}) {
    SCOPED_TRACE(std::string("forward ") + paths.first + ", backward " + paths.second);
    ops::AttentionForward fwd;
    {
      const AttentionMode mode(paths.first);
      fwd = ops::causal_attention_forward(gin.q, gin.k, gin.v, scale);
    }
    const AttentionMode mode(paths.second);
    const auto gg =
        ops::causal_attention_backward(gin.dout, gin.q, gin.k, gin.v, fwd.out, fwd.lse, scale);
    EXPECT_EQ(path_name(ops::cuda::last_backward_path()),
              std::string(std::string(paths.second) == "own" ? "flash" : "cudnn"));
    expect_grads_close(gg, gw, 1e-2);
  }
}

// LT_ATTENTION=cudnn refuses, with cuDNN's reason, what cuDNN cannot run;
// a bad value is an error.
TEST(AttentionCudnn, ModeCudnnRefusesWhatCudnnCannotRun) {
  LT_REQUIRE_CUDNN();
  const Case c{1, 300, 4, 2, 64, DType::BF16};
  if (ops::cuda::cudnn_attn::unsupported_reason(problem_of(c), true).empty()) {
    GTEST_SKIP() << "this cuDNN runs the backward at T=300";
  }
  const Inputs gin = to_gpu(random_inputs(c, 1800));
  const auto fwd = ops::causal_attention_forward(gin.q, gin.k, gin.v, 0.125);
  {
    const AttentionMode mode("cudnn");
    EXPECT_THAT(error_of([&] {
                  ops::causal_attention_backward(gin.dout, gin.q, gin.k, gin.v, fwd.out, fwd.lse,
                                                 0.125);
                }),
                ::testing::HasSubstr("LT_ATTENTION=cudnn"));
  }
  const AttentionMode bad("fast");
  EXPECT_THAT(error_of([&] { ops::causal_attention_forward(gin.q, gin.k, gin.v, 0.125); }),
              ::testing::HasSubstr("LT_ATTENTION must be"));
}

// ---------------------------------------------------------------- benchmark

template <typename Fn>
double median_ms(Fn&& fn, int warmup = 3, int samples = 15) {
  const Stream stream = current_stream(kGpu);
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    Event start(true), end(true);
    start.record(stream);
    fn();
    end.record(stream);
    end.synchronize();
    ms.push_back(start.elapsed_ms(end));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// A random [B, T, H, D] bf16 tensor on the GPU: one random batch entry
// repeated B times (drawing all of it on the host would take longer than
// the benchmark; the repetition does not change the work).
Tensor random_gpu(int64_t b, int64_t t, int64_t h, int64_t d, Generator& gen) {
  const Tensor one = Tensor::randn({1, t, h, d}, gen, DType::F32).to(kGpu).to(DType::BF16);
  Tensor out = Tensor::empty({b, t, h, d}, DType::BF16, kGpu);
  for (int64_t i = 0; i < b; ++i) out.slice(0, i, i + 1).copy_(one);
  return out;
}

TEST(AttentionBench, Throughput) {
  LT_REQUIRE_GPU();
  const char* on = std::getenv("LT_BENCH");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set LT_BENCH=1 to run";
  const int64_t B = 8, T = 2048, Hq = 16, Hkv = 2, D = 128;
  Generator gen(1234);
  const Tensor q = random_gpu(B, T, Hq, D, gen), k = random_gpu(B, T, Hkv, D, gen);
  const Tensor v = random_gpu(B, T, Hkv, D, gen), dout = random_gpu(B, T, Hq, D, gen);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double fwd_flops = 4.0 * B * Hq * T * T * D / 2, bwd_flops = 2.5 * fwd_flops;
  std::printf("AttentionBench (median of 15 timed calls, CUDA events, bf16):\n");
  // Each path's backward takes its own forward's out and lse, as training does.
  for (const char* path : {"own", "cudnn"}) {
    if (std::string(path) == "cudnn" && ops::cuda::cudnn_attn::runtime_version() == 0) {
      std::printf("lazytrain attention cudnn: not in this build\n");
      continue;
    }
    const AttentionMode mode(path);
    const ops::AttentionForward fwd = ops::causal_attention_forward(q, k, v, scale);
    const double fwd_ms = median_ms([&] { ops::causal_attention_forward(q, k, v, scale); });
    const double bwd_ms =
        median_ms([&] { ops::causal_attention_backward(dout, q, k, v, fwd.out, fwd.lse, scale); });
    auto line = [&](const char* what, double flops, double ms) {
      std::printf(
          "lazytrain attention %-5s %-8s B=8 T=2048 Hq=16 Hkv=2 D=128 causal: %8.3f ms %7.1f "
          "TFLOP/s\n",
          path, what, ms, flops / (ms * 1e-3) / 1e12);
    };
    line("fwd", fwd_flops, fwd_ms);
    line("bwd", bwd_flops, bwd_ms);
    line("fwd+bwd", fwd_flops + bwd_flops, fwd_ms + bwd_ms);
  }
}

}  // namespace
}  // namespace lt
