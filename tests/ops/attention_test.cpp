// Causal grouped-query attention: forward and backward against naive
// float64 loops that build the full score matrix, gradients of the
// differentiable wrapper against central differences, and causality.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/functions.h"
#include "ops/attention.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::randn64;
using testing::relative_error_norm;

struct Dims {
  int64_t B, T, Hq, Hkv, D;
  Shape q_shape() const { return {B, T, Hq, D}; }
  Shape kv_shape() const { return {B, T, Hkv, D}; }
  // Element offset of (b, t, h, e) in a contiguous [B, T, H, D] tensor.
  int64_t at(int64_t H, int64_t b, int64_t t, int64_t h, int64_t e) const {
    return ((b * T + t) * H + h) * D + e;
  }
};

struct Reference {
  std::vector<double> out, lse;    // [B, T, Hq, D], [B, Hq, T]
  std::vector<double> dq, dk, dv;  // filled when a dout is given
};

// Textbook attention per (b, h): S = scale Q K^T with S_ij = -inf for j > i,
// P = softmax(S) row by row, O = P V. Query head h uses kv head h / (Hq/Hkv),
// which is where Hugging Face's repeat_kv puts copy h of a kv head. The
// backward is the matrix form: dV = P^T dO, dP = dO V^T,
// dS = P * (dP - rowsum(P * dP)), dQ = scale dS K, dK = scale dS^T Q, with
// dK and dV of a kv head summed over its query heads.
Reference reference(const Dims& s, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, double scale,
                    const std::vector<double>* dout = nullptr) {
  const int64_t T = s.T, D = s.D, group = s.Hq / s.Hkv;
  Reference r;
  r.out.assign(q.size(), 0.0);
  r.lse.assign(static_cast<size_t>(s.B * s.Hq * T), 0.0);
  r.dq.assign(q.size(), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hq; ++h) {
      const int64_t g = h / group;
      std::vector<std::vector<double>> S(T, std::vector<double>(T, neg_inf)), P = S;
      for (int64_t i = 0; i < T; ++i) {
        for (int64_t j = 0; j <= i; ++j) {
          double acc = 0;
          for (int64_t e = 0; e < D; ++e)
            acc += q[s.at(s.Hq, b, i, h, e)] * k[s.at(s.Hkv, b, j, g, e)];
          S[i][j] = scale * acc;
        }
        double m = neg_inf, z = 0;
        for (int64_t j = 0; j < T; ++j) m = std::max(m, S[i][j]);
        for (int64_t j = 0; j < T; ++j) z += std::exp(S[i][j] - m);
        for (int64_t j = 0; j < T; ++j) P[i][j] = std::exp(S[i][j] - m) / z;
        r.lse[(b * s.Hq + h) * T + i] = m + std::log(z);
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < D; ++e)
            r.out[s.at(s.Hq, b, i, h, e)] += P[i][j] * v[s.at(s.Hkv, b, j, g, e)];
      }
      if (!dout) continue;
      const std::vector<double>& dO = *dout;
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> dP(T, 0.0);
        double row = 0;
        for (int64_t j = 0; j < T; ++j) {
          for (int64_t e = 0; e < D; ++e)
            dP[j] += dO[s.at(s.Hq, b, i, h, e)] * v[s.at(s.Hkv, b, j, g, e)];
          row += P[i][j] * dP[j];
        }
        for (int64_t j = 0; j < T; ++j) {
          const double dS = P[i][j] * (dP[j] - row);
          for (int64_t e = 0; e < D; ++e) {
            r.dq[s.at(s.Hq, b, i, h, e)] += scale * dS * k[s.at(s.Hkv, b, j, g, e)];
            r.dk[s.at(s.Hkv, b, j, g, e)] += scale * dS * q[s.at(s.Hq, b, i, h, e)];
            r.dv[s.at(s.Hkv, b, j, g, e)] += P[i][j] * dO[s.at(s.Hq, b, i, h, e)];
          }
        }
      }
    }
  }
  return r;
}

struct Inputs {
  Tensor q, k, v;
};

Inputs random_inputs(const Dims& s, Generator& gen, DType dtype = DType::F64) {
  return {Tensor::randn(s.q_shape(), gen, dtype), Tensor::randn(s.kv_shape(), gen, dtype),
          Tensor::randn(s.kv_shape(), gen, dtype)};
}

TEST(CausalAttention, ForwardMatchesFloat64Reference) {
  Generator gen(11);
  const std::vector<std::pair<int64_t, int64_t>> heads = {{2, 2}, {4, 2}, {6, 2}, {3, 1}};
  for (int64_t T : {1, 5, 17}) {
    for (auto [Hq, Hkv] : heads) {
      for (int64_t D : {4, 8}) {
        SCOPED_TRACE(::testing::Message()
                     << "T=" << T << " Hq=" << Hq << " Hkv=" << Hkv << " D=" << D);
        const Dims s{2, T, Hq, Hkv, D};
        Inputs in = random_inputs(s, gen);
        const double scale = 1.0 / std::sqrt(static_cast<double>(D));
        Reference ref =
            reference(s, in.q.to_doubles(), in.k.to_doubles(), in.v.to_doubles(), scale);

        ops::AttentionForward f64 = ops::causal_attention_forward(in.q, in.k, in.v, scale);
        ASSERT_EQ(f64.out.shape(), s.q_shape());
        ASSERT_EQ(f64.lse.shape(), (Shape{2, Hq, T}));
        EXPECT_EQ(f64.lse.dtype(), DType::F64);
        EXPECT_TRUE(all_close(f64.out.to_doubles(), ref.out, 1e-12, 1e-12));
        EXPECT_TRUE(all_close(f64.lse.to_doubles(), ref.lse, 1e-12, 1e-12));

        // f32 inputs hold the same values up to rounding.
        ops::AttentionForward f32 = ops::causal_attention_forward(
            in.q.to(DType::F32), in.k.to(DType::F32), in.v.to(DType::F32), scale);
        EXPECT_EQ(f32.out.dtype(), DType::F32);
        EXPECT_EQ(f32.lse.dtype(), DType::F32);
        EXPECT_TRUE(all_close(f32.out.to_doubles(), ref.out, 2e-5, 2e-5));
        EXPECT_TRUE(all_close(f32.lse.to_doubles(), ref.lse, 2e-5, 2e-5));
      }
    }
  }
}

TEST(CausalAttention, CustomAndDefaultScale) {
  Generator gen(12);
  const Dims s{2, 6, 4, 2, 8};
  Inputs in = random_inputs(s, gen);
  auto qv = in.q.to_doubles(), kv = in.k.to_doubles(), vv = in.v.to_doubles();
  for (double scale : {0.05, 0.9, 2.5}) {
    SCOPED_TRACE(scale);
    Reference ref = reference(s, qv, kv, vv, scale);
    EXPECT_TRUE(all_close(ops::causal_attention_forward(in.q, in.k, in.v, scale).out.to_doubles(),
                          ref.out, 1e-12, 1e-12));
    EXPECT_TRUE(
        all_close(causal_attention(in.q, in.k, in.v, scale).to_doubles(), ref.out, 1e-12, 1e-12));
  }
  // The default is 1/sqrt(D); a different scale gives visibly different output.
  Reference ref = reference(s, qv, kv, vv, 1.0 / std::sqrt(8.0));
  EXPECT_TRUE(all_close(causal_attention(in.q, in.k, in.v).to_doubles(), ref.out, 1e-12, 1e-12));
  EXPECT_FALSE(all_close(causal_attention(in.q, in.k, in.v, 1.0).to_doubles(), ref.out, 1e-6, 0));
}

TEST(CausalAttention, BackwardMatchesFloat64Reference) {
  Generator gen(13);
  // The last shape is large enough that every pass splits across threads.
  for (const Dims& s : {Dims{2, 1, 2, 2, 4}, Dims{2, 5, 3, 1, 4}, Dims{2, 17, 6, 2, 8},
                        Dims{1, 9, 4, 2, 11}, Dims{2, 64, 4, 2, 16}}) {
    SCOPED_TRACE(::testing::Message()
                 << "T=" << s.T << " Hq=" << s.Hq << " Hkv=" << s.Hkv << " D=" << s.D);
    Inputs in = random_inputs(s, gen);
    Tensor dout = randn64(s.q_shape(), gen);
    const double scale = 0.7;
    const std::vector<double> dov = dout.to_doubles();
    Reference ref =
        reference(s, in.q.to_doubles(), in.k.to_doubles(), in.v.to_doubles(), scale, &dov);
    for (DType dt : {DType::F64, DType::F32}) {
      SCOPED_TRACE(dtype_name(dt));
      const double tol = dt == DType::F64 ? 1e-11 : 5e-5;
      Tensor q = in.q.to(dt), k = in.k.to(dt), v = in.v.to(dt), g = dout.to(dt);
      ops::AttentionForward f = ops::causal_attention_forward(q, k, v, scale);
      ops::AttentionGrads grads = ops::causal_attention_backward(g, q, k, v, f.out, f.lse, scale);
      EXPECT_EQ(grads.dq.dtype(), dt);
      ASSERT_EQ(grads.dk.shape(), s.kv_shape());
      EXPECT_TRUE(all_close(grads.dq.to_doubles(), ref.dq, tol, tol));
      EXPECT_TRUE(all_close(grads.dk.to_doubles(), ref.dk, tol, tol));
      EXPECT_TRUE(all_close(grads.dv.to_doubles(), ref.dv, tol, tol));
    }
  }
}

TEST(CausalAttention, Bf16ComputesInF32AndKeepsItsDtype) {
  Generator gen(14);
  const Dims s{2, 17, 4, 2, 8};
  Inputs in = random_inputs(s, gen, DType::F32);
  Tensor dout = Tensor::randn(s.q_shape(), gen, DType::F32);
  const double scale = 1.0 / std::sqrt(8.0);
  ops::AttentionForward f32 = ops::causal_attention_forward(in.q, in.k, in.v, scale);
  ops::AttentionGrads g32 =
      ops::causal_attention_backward(dout, in.q, in.k, in.v, f32.out, f32.lse, scale);

  Tensor q = in.q.to(DType::BF16), k = in.k.to(DType::BF16), v = in.v.to(DType::BF16);
  ops::AttentionForward f16 = ops::causal_attention_forward(q, k, v, scale);
  EXPECT_EQ(f16.out.dtype(), DType::BF16);
  EXPECT_EQ(f16.lse.dtype(), DType::F32);
  EXPECT_LT(relative_error_norm(f16.out.to_doubles(), f32.out.to_doubles()), 1e-2);
  EXPECT_LT(relative_error_norm(f16.lse.to_doubles(), f32.lse.to_doubles()), 1e-2);

  ops::AttentionGrads g16 =
      ops::causal_attention_backward(dout.to(DType::BF16), q, k, v, f16.out, f16.lse, scale);
  EXPECT_EQ(g16.dq.dtype(), DType::BF16);
  EXPECT_EQ(g16.dk.dtype(), DType::BF16);
  EXPECT_EQ(g16.dv.dtype(), DType::BF16);
  EXPECT_LT(relative_error_norm(g16.dq.to_doubles(), g32.dq.to_doubles()), 2e-2);
  EXPECT_LT(relative_error_norm(g16.dk.to_doubles(), g32.dk.to_doubles()), 2e-2);
  EXPECT_LT(relative_error_norm(g16.dv.to_doubles(), g32.dv.to_doubles()), 2e-2);
}

TEST(CausalAttention, LaterKeysAndValuesDoNotReachEarlierPositions) {
  Generator gen(15);
  const Dims s{2, 9, 4, 2, 8};
  Inputs in = random_inputs(s, gen, DType::F32);
  const int64_t cut = 4;  // keys and values after position `cut` change
  Tensor k2 = in.k.clone(), v2 = in.v.clone();
  float* pk = k2.data<float>();
  float* pv = v2.data<float>();
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = cut + 1; t < s.T; ++t)
      for (int64_t h = 0; h < s.Hkv; ++h)
        for (int64_t e = 0; e < s.D; ++e) {
          pk[s.at(s.Hkv, b, t, h, e)] += 3.0f;
          pv[s.at(s.Hkv, b, t, h, e)] -= 2.0f;
        }
  std::vector<double> a = causal_attention(in.q, in.k, in.v).to_doubles();
  std::vector<double> c = causal_attention(in.q, k2, v2).to_doubles();
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t) {
      double diff = 0;
      for (int64_t h = 0; h < s.Hq; ++h)
        for (int64_t e = 0; e < s.D; ++e)
          diff = std::max(diff, std::abs(a[s.at(s.Hq, b, t, h, e)] - c[s.at(s.Hq, b, t, h, e)]));
      if (t <= cut) {
        EXPECT_EQ(diff, 0.0) << "position " << t << " saw a later key";
      } else {
        EXPECT_GT(diff, 1e-3) << "position " << t << " ignored its own keys";
      }
    }
}

TEST(CausalAttentionGrad, MatchesCentralDifferences) {
  Generator gen(16);
  // (Hq, Hkv) covers plain multi-head, GQA and a single shared kv head; D=11
  // exercises both the 8-wide blocks and the scalar tail of the inner loops.
  for (const Dims& s :
       {Dims{2, 4, 2, 2, 3}, Dims{1, 5, 4, 2, 3}, Dims{2, 3, 3, 1, 4}, Dims{1, 3, 2, 1, 11}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " Hq=" << s.Hq
                                      << " Hkv=" << s.Hkv << " D=" << s.D);
    Inputs in = random_inputs(s, gen);
    EXPECT_TRUE(
        gradcheck([](auto& x) { return causal_attention(x[0], x[1], x[2]); }, {in.q, in.k, in.v}));
  }
  const Dims s{1, 4, 4, 2, 4};
  Inputs in = random_inputs(s, gen);
  EXPECT_TRUE(gradcheck([](auto& x) { return causal_attention(x[0], x[1], x[2], 1.7); },
                        {in.q, in.k, in.v}));
}

TEST(CausalAttention, RejectsBadShapes) {
  Generator gen(17);
  Tensor q = randn64({1, 4, 3, 8}, gen), k = randn64({1, 4, 2, 8}, gen);
  EXPECT_THROW(ops::causal_attention_forward(q, k, k, 1.0), Error);  // 3 % 2 != 0
  Tensor q4 = randn64({1, 4, 4, 8}, gen);
  EXPECT_THROW(ops::causal_attention_forward(q4, k, randn64({1, 4, 2, 4}, gen), 1.0), Error);
  EXPECT_THROW(ops::causal_attention_forward(q4, randn64({1, 5, 2, 8}, gen),
                                             randn64({1, 5, 2, 8}, gen), 1.0),
               Error);
  EXPECT_THROW(ops::causal_attention_forward(q4.view({4, 4, 8}), k, k, 1.0), Error);
  EXPECT_THROW(ops::causal_attention_forward(q4, k.to(DType::F32), k.to(DType::F32), 1.0), Error);
}

}  // namespace
}  // namespace lt
