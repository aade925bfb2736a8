#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cuda/attention.h"

namespace lt::ops {

namespace {

// Sizes of one call, read off q [B, T, Hq, D] and k [B, T, Hkv, D].
struct AttentionDims {
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t group() const { return q_heads / kv_heads; }  // query heads per kv head
};

AttentionDims check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                           const char* op) {
  for (const Tensor* t : {&q, &k, &v}) {
    LT_CHECK(t->defined(), op, ": q, k and v must all be defined");
    check_floating(*t, op);
    LT_CHECK(t->dim() == 4, op, ": expected [B, T, heads, D] tensors, got ", t->str());
  }
  LT_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), op, ": dtypes differ (q ",
           dtype_name(q.dtype()), ", k ", dtype_name(k.dtype()), ", v ", dtype_name(v.dtype()),
           ")");
  LT_CHECK(k.shape() == v.shape(), op, ": k ", shape_str(k.shape()), " and v ",
           shape_str(v.shape()), " differ");
  AttentionDims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  LT_CHECK(k.size(0) == d.batch && k.size(1) == d.seq && k.size(3) == d.head_dim, op, ": q ",
           shape_str(q.shape()), " and k ", shape_str(k.shape()), " disagree on B, T or D");
  LT_CHECK(d.kv_heads > 0 && d.q_heads % d.kv_heads == 0, op, ": ", d.q_heads,
           " query heads are not a multiple of ", d.kv_heads, " kv heads");
  LT_CHECK(std::isfinite(scale), op, ": softmax scale must be finite, got ", scale);
  return d;
}

// Eight independent partial sums: a fixed-width block the compiler turns
// into SIMD at -O2 without reassociating floating point behind our back.
constexpr int64_t kLanes = 8;

template <typename T>
inline T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T acc[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    for (int64_t u = 0; u < kLanes; ++u) acc[u] += a[d + u] * b[d + u];
  }
  T tail = 0;
  for (; d < n; ++d) tail += a[d] * b[d];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// y += alpha * x
template <typename T>
inline void axpy(T* __restrict y, T alpha, const T* __restrict x, int64_t n) {
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    for (int64_t u = 0; u < kLanes; ++u) y[d + u] += alpha * x[d + u];
  }
  for (; d < n; ++d) y[d] += alpha * x[d];
}

// Rows per parallel_for chunk so that one chunk holds roughly this many
// multiply-adds; below it, handing work to another thread costs more than
// it saves. A row costs about T * D on average (causal half of 2 T D).
constexpr int64_t kWorkPerChunk = 1 << 15;

int64_t grain_rows(const AttentionDims& d) {
  return std::max<int64_t>(1, kWorkPerChunk / std::max<int64_t>(1, d.seq * d.head_dim));
}

// Element offsets into contiguous [B, T, H, D] tensors: the row of (b, t, h)
// is at ((b * T + t) * H + h) * D, and consecutive t are H * D apart.
inline int64_t row_offset(const AttentionDims& d, int64_t heads, int64_t b, int64_t t, int64_t h) {
  return ((b * d.seq + t) * heads + h) * d.head_dim;
}

// One query row per work item, indexed r = (b * Hq + h) * T + i, which is
// also the index into lse [B, Hq, T]. Consecutive rows share (b, h), so a
// chunk keeps reusing one head's keys and values from cache.
template <typename T>
void forward_kernel(const AttentionDims& d, const T* q, const T* k, const T* v, T scale, T* out,
                    T* lse) {
  const int64_t D = d.head_dim, kv_stride = d.kv_heads * D;
  parallel_for(0, d.batch * d.q_heads * d.seq, grain_rows(d), [&](int64_t lo, int64_t hi) {
    std::vector<T> p(static_cast<size_t>(d.seq));  // this row's scores, then probabilities
    std::vector<T> acc(static_cast<size_t>(D));
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t i = r % d.seq, bh = r / d.seq, h = bh % d.q_heads, b = bh / d.q_heads;
      const int64_t g = h / d.group();
      const T* qi = q + row_offset(d, d.q_heads, b, i, h);
      const T* k0 = k + row_offset(d, d.kv_heads, b, 0, g);
      const T* v0 = v + row_offset(d, d.kv_heads, b, 0, g);
      // Subtracting the row max keeps every exp() <= 1.
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j <= i; ++j) {
        p[j] = scale * dot(qi, k0 + j * kv_stride, D);
        m = std::max(m, p[j]);
      }
      T sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        p[j] = std::exp(p[j] - m);
        sum += p[j];
      }
      std::fill(acc.begin(), acc.end(), T{0});
      for (int64_t j = 0; j <= i; ++j) axpy(acc.data(), p[j], v0 + j * kv_stride, D);
      const T inv = T{1} / sum;
      T* oi = out + row_offset(d, d.q_heads, b, i, h);
      for (int64_t e = 0; e < D; ++e) oi[e] = acc[e] * inv;
      lse[r] = m + std::log(sum);
    }
  });
}

// The backward of o_i = sum_j p_ij v_j with p_ij = exp(s_ij - lse_i),
// s_ij = scale * q_i . k_j:
//   dv_j  = sum_i p_ij do_i
//   dp_ij = do_i . v_j
//   ds_ij = p_ij (dp_ij - delta_i),   delta_i = do_i . o_i  (= sum_j p_ij dp_ij)
//   dq_i  = scale * sum_j ds_ij k_j
//   dk_j  = scale * sum_i ds_ij q_i
// dq and (dk, dv) are computed in two passes that each own their output
// rows: pass 1 over query rows, pass 2 over key rows, where a key row of kv
// head g sums over every query head of g's group. Each pass recomputes p,
// which costs one extra q . k and do . v per pair but needs no locks, no
// per-thread copies of dk/dv and no T x T buffer.
template <typename T>
void backward_kernel(const AttentionDims& d, const T* dout, const T* q, const T* k, const T* v,
                     const T* out, const T* lse, T scale, T* dq, T* dk, T* dv) {
  const int64_t D = d.head_dim, q_stride = d.q_heads * D, kv_stride = d.kv_heads * D;
  const int64_t q_rows = d.batch * d.q_heads * d.seq;
  const int64_t grain = grain_rows(d);

  // delta, indexed like lse: (b * Hq + h) * T + i.
  std::vector<T> delta(static_cast<size_t>(q_rows));
  parallel_for(0, q_rows, std::max<int64_t>(1, kWorkPerChunk / std::max<int64_t>(1, D)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t r = lo; r < hi; ++r) {
                   const int64_t i = r % d.seq, bh = r / d.seq;
                   const int64_t off = row_offset(d, d.q_heads, bh / d.q_heads, i, bh % d.q_heads);
                   delta[r] = dot(dout + off, out + off, D);
                 }
               });

  // Pass 1: dq, one query row per work item (same order as the forward).
  parallel_for(0, q_rows, grain, [&](int64_t lo, int64_t hi) {
    std::vector<T> acc(static_cast<size_t>(D));
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t i = r % d.seq, bh = r / d.seq, h = bh % d.q_heads, b = bh / d.q_heads;
      const int64_t g = h / d.group();
      const int64_t off = row_offset(d, d.q_heads, b, i, h);
      const T* qi = q + off;
      const T* doi = dout + off;
      const T* k0 = k + row_offset(d, d.kv_heads, b, 0, g);
      const T* v0 = v + row_offset(d, d.kv_heads, b, 0, g);
      std::fill(acc.begin(), acc.end(), T{0});
      for (int64_t j = 0; j <= i; ++j) {
        const T* kj = k0 + j * kv_stride;
        const T p = std::exp(scale * dot(qi, kj, D) - lse[r]);
        const T ds = p * (dot(doi, v0 + j * kv_stride, D) - delta[r]);
        axpy(acc.data(), ds, kj, D);
      }
      T* dqi = dq + off;
      for (int64_t e = 0; e < D; ++e) dqi[e] = scale * acc[e];
    }
  });

  // Pass 2: dk and dv, one key row per work item, r = (b * Hkv + g) * T + j.
  parallel_for(0, d.batch * d.kv_heads * d.seq, grain, [&](int64_t lo, int64_t hi) {
    std::vector<T> dk_acc(static_cast<size_t>(D)), dv_acc(static_cast<size_t>(D));
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t j = r % d.seq, bg = r / d.seq, g = bg % d.kv_heads, b = bg / d.kv_heads;
      const int64_t off = row_offset(d, d.kv_heads, b, j, g);
      const T* kj = k + off;
      const T* vj = v + off;
      std::fill(dk_acc.begin(), dk_acc.end(), T{0});
      std::fill(dv_acc.begin(), dv_acc.end(), T{0});
      for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
        const T* q0 = q + row_offset(d, d.q_heads, b, 0, h);
        const T* do0 = dout + row_offset(d, d.q_heads, b, 0, h);
        const T* lse_bh = lse + (b * d.q_heads + h) * d.seq;
        const T* delta_bh = delta.data() + (b * d.q_heads + h) * d.seq;
        for (int64_t i = j; i < d.seq; ++i) {  // the queries that see key j
          const T* qi = q0 + i * q_stride;
          const T* doi = do0 + i * q_stride;
          const T p = std::exp(scale * dot(qi, kj, D) - lse_bh[i]);
          axpy(dv_acc.data(), p, doi, D);
          const T ds = p * (dot(doi, vj, D) - delta_bh[i]);
          axpy(dk_acc.data(), ds, qi, D);
        }
      }
      for (int64_t e = 0; e < D; ++e) {
        dk[off + e] = scale * dk_acc[e];
        dv[off + e] = dv_acc[e];
      }
    }
  });
}

}  // namespace

AttentionForward causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          double scale) {
  const char* op = "causal_attention_forward";
  const AttentionDims d = check_inputs(q, k, v, scale, op);
  const Device device = common_device({&q, &k, &v}, op);
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) return cuda::causal_attention_forward(q, k, v, scale);
#endif
  if (!device.is_cpu()) no_kernel(op, device);

  const DType ct = compute_dtype(q.dtype());
  // Contiguous compute-type copies once, so the kernels see plain row pointers.
  const Tensor cq = as_compute(q), ck = as_compute(k), cv = as_compute(v);
  Tensor out = Tensor::empty(q.shape(), ct);
  Tensor lse = Tensor::empty({d.batch, d.q_heads, d.seq}, ct);
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T>(d, cq.data<T>(), ck.data<T>(), cv.data<T>(), static_cast<T>(scale),
                      out.data<T>(), lse.data<T>());
  });
  return {out.to(q.dtype()), lse};
}

AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& out, const Tensor& lse,
                                         double scale) {
  const char* op = "causal_attention_backward";
  const AttentionDims d = check_inputs(q, k, v, scale, op);
  for (const Tensor* t : {&dout, &out, &lse}) {
    LT_CHECK(t->defined(), op, ": dout, out and lse must all be defined");
    check_floating(*t, op);
  }
  LT_CHECK(dout.shape() == q.shape() && out.shape() == q.shape(), op, ": dout ",
           shape_str(dout.shape()), " and out ", shape_str(out.shape()), " must match q ",
           shape_str(q.shape()));
  LT_CHECK(lse.shape() == (Shape{d.batch, d.q_heads, d.seq}), op, ": lse ", shape_str(lse.shape()),
           " must be [B, Hq, T] = ", shape_str({d.batch, d.q_heads, d.seq}));
  const Device device = common_device({&dout, &q, &k, &v, &out, &lse}, op);
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) return cuda::causal_attention_backward(dout, q, k, v, out, lse, scale);
#endif
  if (!device.is_cpu()) no_kernel(op, device);

  const DType ct = compute_dtype(q.dtype());
  const Tensor cq = as_compute(q), ck = as_compute(k), cv = as_compute(v);
  // dout may arrive in another floating type than q (an f32 gradient of a
  // bf16 output, say); everything meets in q's compute type.
  const Tensor cdout = dout.to(ct).contiguous(), cout = out.to(ct).contiguous();
  const Tensor clse = lse.to(ct).contiguous();
  Tensor dq = Tensor::empty(q.shape(), ct);
  Tensor dk = Tensor::empty(k.shape(), ct);
  Tensor dv = Tensor::empty(v.shape(), ct);
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    backward_kernel<T>(d, cdout.data<T>(), cq.data<T>(), ck.data<T>(), cv.data<T>(), cout.data<T>(),
                       clse.data<T>(), static_cast<T>(scale), dq.data<T>(), dk.data<T>(),
                       dv.data<T>());
  });
  return {dq.to(q.dtype()), dk.to(k.dtype()), dv.to(v.dtype())};
}

}  // namespace lt::ops
