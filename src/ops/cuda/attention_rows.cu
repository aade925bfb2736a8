// The general attention kernels: one warp per row, f32 arithmetic, any
// head_dim up to kRowsMaxHeadDim, f32 or bf16 storage. They are what f32
// inputs (tests, references) and shapes the flash kernels do not cover run
// on; simple rather than fast. Lane l holds elements l, l + 32, ... of a
// row, and every dot product is a warp sum. The structure follows the CPU
// backend (ops/attention.cpp): an online-softmax forward, then a dq pass
// over query rows and a dk/dv pass over key rows, each owning its outputs.
#include "ops/cuda/attention_kernels.cuh"

namespace lt::ops::cuda::attn {

namespace {

constexpr int kPerLane = kRowsMaxHeadDim / 32;
constexpr int kThreads = 128;  // 4 rows per block

template <typename T>
__device__ __forceinline__ void load_row(float (&r)[kPerLane], const T* p, int dim, int lane) {
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int d = lane + 32 * e;
    r[e] = d < dim ? to_f32(p[d]) : 0.0f;
  }
}

template <typename T>
__device__ __forceinline__ float dot_row(const float (&r)[kPerLane], const T* p, int dim,
                                         int lane) {
  float acc = 0.0f;
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int d = lane + 32 * e;
    if (d < dim) acc += r[e] * to_f32(p[d]);
  }
  return warp_sum(acc);
}

template <typename T>
__device__ __forceinline__ void store_row(T* p, const float (&r)[kPerLane], float mul, int dim,
                                          int lane) {
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int d = lane + 32 * e;
    if (d < dim) p[d] = from_f32<T>(r[e] * mul);
  }
}

// The warp's global index, or -1 past `rows`.
__device__ __forceinline__ int64_t warp_row(int64_t rows) {
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  return w < rows ? w : -1;
}

// Offset of row (b, t, head) in a [B, T, heads, D] tensor.
__device__ __forceinline__ int64_t offset(const Shape4& s, int heads, int64_t b, int64_t t,
                                          int64_t head) {
  return ((b * s.seq + t) * heads + head) * s.head_dim;
}

// Query row r = (b * Hq + h) * T + i (the lse index): its position i, the
// offset of (b, i, h) in q, and the offset of (b, 0, h's kv head) in k and v.
struct QueryRow {
  int64_t i, q, kv0;
};
__device__ __forceinline__ QueryRow query_row(const Shape4& s, int64_t r) {
  const int64_t i = r % s.seq, bh = r / s.seq, h = bh % s.q_heads, b = bh / s.q_heads;
  return {i, offset(s, s.q_heads, b, i, h), offset(s, s.kv_heads, b, 0, h / s.group())};
}

template <typename T>
__global__ void rows_forward(ForwardArgs a) {
  const Shape4 s = a.s;
  const int64_t r = warp_row(static_cast<int64_t>(s.batch) * s.q_heads * s.seq);
  if (r < 0) return;
  const int lane = static_cast<int>(threadIdx.x) & 31, D = s.head_dim;
  const QueryRow at = query_row(s, r);
  const int64_t i = at.i, kv_stride = static_cast<int64_t>(s.kv_heads) * D;
  const T* k0 = static_cast<const T*>(a.k) + at.kv0;
  const T* v0 = static_cast<const T*>(a.v) + at.kv0;
  float q[kPerLane], acc[kPerLane] = {};
  load_row(q, static_cast<const T*>(a.q) + at.q, D, lane);
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = 0; j <= i; ++j) {
    const float x = a.scale * dot_row(q, k0 + j * kv_stride, D, lane);
    const float m_new = fmaxf(m, x);
    const float alpha = expf(m - m_new), p = expf(x - m_new);
    l = l * alpha + p;
    const T* vj = v0 + j * kv_stride;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int d = lane + 32 * e;
      acc[e] = acc[e] * alpha + (d < D ? p * to_f32(vj[d]) : 0.0f);
    }
    m = m_new;
  }
  store_row(static_cast<T*>(a.out) + at.q, acc, 1.0f / l, D, lane);
  if (lane == 0) a.lse[r] = m + logf(l);
}

// dq_i = scale * sum_{j <= i} p_ij (do_i . v_j - delta_i) k_j
template <typename T>
__global__ void rows_backward_dq(BackwardArgs a) {
  const Shape4 s = a.s;
  const int64_t r = warp_row(static_cast<int64_t>(s.batch) * s.q_heads * s.seq);
  if (r < 0) return;
  const int lane = static_cast<int>(threadIdx.x) & 31, D = s.head_dim;
  const QueryRow at = query_row(s, r);
  const int64_t i = at.i, kv_stride = static_cast<int64_t>(s.kv_heads) * D;
  const T* k0 = static_cast<const T*>(a.k) + at.kv0;
  const T* v0 = static_cast<const T*>(a.v) + at.kv0;
  const int64_t off = at.q;
  float q[kPerLane], dout[kPerLane], acc[kPerLane] = {};
  load_row(q, static_cast<const T*>(a.q) + off, D, lane);
  load_row(dout, static_cast<const T*>(a.dout) + off, D, lane);
  const float lse = a.lse[r], delta = a.delta[r];
  for (int64_t j = 0; j <= i; ++j) {
    const T* kj = k0 + j * kv_stride;
    const float p = expf(a.scale * dot_row(q, kj, D, lane) - lse);
    const float ds = p * (dot_row(dout, v0 + j * kv_stride, D, lane) - delta);
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int d = lane + 32 * e;
      if (d < D) acc[e] += ds * to_f32(kj[d]);
    }
  }
  store_row(static_cast<T*>(a.dq) + off, acc, a.scale, D, lane);
}

// For key row j of kv head g, over the group's query heads h and i >= j:
//   dv_j = sum p_ij do_i,  dk_j = scale * sum p_ij (do_i . v_j - delta_i) q_i
// Rows r = (b * Hkv + g) * T + j.
template <typename T>
__global__ void rows_backward_dkdv(BackwardArgs a) {
  const Shape4 s = a.s;
  const int64_t r = warp_row(static_cast<int64_t>(s.batch) * s.kv_heads * s.seq);
  if (r < 0) return;
  const int lane = static_cast<int>(threadIdx.x) & 31, D = s.head_dim;
  const int64_t j = r % s.seq, bg = r / s.seq, g = bg % s.kv_heads, b = bg / s.kv_heads;
  const int64_t q_stride = static_cast<int64_t>(s.q_heads) * D;
  const int64_t off = offset(s, s.kv_heads, b, j, g);
  float k[kPerLane], v[kPerLane], dk[kPerLane] = {}, dv[kPerLane] = {};
  load_row(k, static_cast<const T*>(a.k) + off, D, lane);
  load_row(v, static_cast<const T*>(a.v) + off, D, lane);
  for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
    const T* q0 = static_cast<const T*>(a.q) + offset(s, s.q_heads, b, 0, h);
    const T* do0 = static_cast<const T*>(a.dout) + offset(s, s.q_heads, b, 0, h);
    const float* lse = a.lse + (b * s.q_heads + h) * s.seq;
    const float* delta = a.delta + (b * s.q_heads + h) * s.seq;
    for (int64_t i = j; i < s.seq; ++i) {
      const T* qi = q0 + i * q_stride;
      const T* doi = do0 + i * q_stride;
      const float p = expf(a.scale * dot_row(k, qi, D, lane) - lse[i]);
      const float ds = p * (dot_row(v, doi, D, lane) - delta[i]);
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int d = lane + 32 * e;
        if (d < D) {
          dv[e] += p * to_f32(doi[d]);
          dk[e] += ds * to_f32(qi[d]);
        }
      }
    }
  }
  store_row(static_cast<T*>(a.dk) + off, dk, a.scale, D, lane);
  store_row(static_cast<T*>(a.dv) + off, dv, 1.0f, D, lane);
}

// Rows r = (b * T + t) * Hq + h in input order (coalesced reads).
template <typename T>
__global__ void delta_rows(Shape4 s, const T* dout, const T* out, float* delta) {
  const int64_t r = warp_row(static_cast<int64_t>(s.batch) * s.seq * s.q_heads);
  if (r < 0) return;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const T* pd = dout + r * s.head_dim;
  const T* po = out + r * s.head_dim;
  float acc = 0.0f;
  for (int d = lane; d < s.head_dim; d += 32) acc += to_f32(pd[d]) * to_f32(po[d]);
  acc = warp_sum(acc);
  if (lane == 0) {
    const int64_t h = r % s.q_heads, bt = r / s.q_heads, t = bt % s.seq, b = bt / s.seq;
    delta[(b * s.q_heads + h) * s.seq + t] = acc;
  }
}

unsigned blocks_for_rows(int64_t rows) {
  constexpr int64_t per_block = kThreads / 32;
  const int64_t blocks = (rows + per_block - 1) / per_block;
  LT_CHECK(blocks <= 0x7fffffff, "causal_attention: ", rows, " rows exceed the grid");
  return static_cast<unsigned>(blocks);
}

}  // namespace

template <typename T>
void launch_rows_forward(const ForwardArgs& a, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(a.s.batch) * a.s.q_heads * a.s.seq;
  rows_forward<T><<<blocks_for_rows(rows), kThreads, 0, stream>>>(a);
  LT_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void launch_rows_backward(const BackwardArgs& a, cudaStream_t stream) {
  const int64_t q_rows = static_cast<int64_t>(a.s.batch) * a.s.q_heads * a.s.seq;
  const int64_t kv_rows = static_cast<int64_t>(a.s.batch) * a.s.kv_heads * a.s.seq;
  rows_backward_dq<T><<<blocks_for_rows(q_rows), kThreads, 0, stream>>>(a);
  LT_CUDA_CHECK(cudaGetLastError());
  rows_backward_dkdv<T><<<blocks_for_rows(kv_rows), kThreads, 0, stream>>>(a);
  LT_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void launch_delta(const Shape4& s, const T* dout, const T* out, float* delta, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(s.batch) * s.seq * s.q_heads;
  delta_rows<T><<<blocks_for_rows(rows), kThreads, 0, stream>>>(s, dout, out, delta);
  LT_CUDA_CHECK(cudaGetLastError());
}

template void launch_rows_forward<float>(const ForwardArgs&, cudaStream_t);
template void launch_rows_forward<bf16>(const ForwardArgs&, cudaStream_t);
template void launch_rows_backward<float>(const BackwardArgs&, cudaStream_t);
template void launch_rows_backward<bf16>(const BackwardArgs&, cudaStream_t);
template void launch_delta<float>(const Shape4&, const float*, const float*, float*, cudaStream_t);
template void launch_delta<bf16>(const Shape4&, const bf16*, const bf16*, float*, cudaStream_t);

}  // namespace lt::ops::cuda::attn
