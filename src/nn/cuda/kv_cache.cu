// The KV cache on the GPU: appending a step's keys and values at each row's
// own position, and attention of a few new queries over a row's cache
// (decoding: one query per row, so the training kernels' tiles over query
// blocks would sit idle).
//
// cached_attention_kernel: one block per (row, query token, query head),
// kWarps warps. Warp w takes keys w, w + kWarps, ...; its 32 lanes split
// head_dim (lane i holds elements i, i + 32, ...), so a score is one warp
// reduction. Each warp keeps an online softmax (running max, sum, and the
// weighted sum of values); the warps' partials are merged through shared
// memory at the end. Everything computes in f32; the output is rounded
// once to the storage type.
#include "nn/cuda/kv_cache.h"
#include "ops/cuda/kernel_common.cuh"

namespace lt::nn::cuda {

namespace {

using ops::cuda::bf16;
using ops::cuda::from_f32;
using ops::cuda::to_f32;

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // head_dim <= 256 (every supported family has <= 256)

template <typename T>
__global__ void write_cache_kernel(T* cache, const T* fresh, const int64_t* starts, int64_t rows,
                                   int64_t tokens, int64_t capacity, int64_t width) {
  const int64_t total = rows * tokens * width;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t e = i % width, bt = i / width;
    const int64_t b = bt / tokens, t = bt % tokens;
    cache[(b * capacity + starts[b] + t) * width + e] = fresh[i];
  }
}

struct AttentionShape {
  int64_t tokens, heads, kv_heads, head_dim, capacity;
  float scale;
};

template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
    cached_attention_kernel(const T* q, const T* k, const T* v, const int64_t* starts, T* out,
                            AttentionShape s) {
  const int64_t task = blockIdx.x;  // (b * tokens + t) * heads + h
  const int64_t h = task % s.heads, bt = task / s.heads;
  const int64_t b = bt / s.tokens, t = bt % s.tokens;
  const int64_t kv = h / (s.heads / s.kv_heads);
  const int64_t keys = starts[b] + t + 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per_lane = static_cast<int>((s.head_dim + 31) / 32);

  float qr[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t i = lane + 32 * r;
    qr[r] = r < per_lane && i < s.head_dim ? to_f32(q[task * s.head_dim + i]) : 0.0f;
    acc[r] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int64_t row_stride = s.kv_heads * s.head_dim;
  const T* kb = k + b * s.capacity * row_stride + kv * s.head_dim;
  const T* vb = v + b * s.capacity * row_stride + kv * s.head_dim;
  for (int64_t j = warp; j < keys; j += kWarps) {
    const T* kr = kb + j * row_stride;
    float dot = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int64_t i = lane + 32 * r;
      if (r < per_lane && i < s.head_dim) dot += qr[r] * to_f32(kr[i]);
    }
    const float score = ops::cuda::warp_sum(dot) * s.scale;
    const float m_new = fmaxf(m, score);
    const float correction = __expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = __expf(score - m_new);
    l = l * correction + p;
    const T* vr = vb + j * row_stride;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int64_t i = lane + 32 * r;
      if (r < per_lane && i < s.head_dim) acc[r] = acc[r] * correction + p * to_f32(vr[i]);
    }
    m = m_new;
  }

  // Merge the warps: scale each by exp(m_w - max) and add.
  __shared__ float warp_m[kWarps], warp_l[kWarps];
  __shared__ float warp_acc[kWarps][kMaxPerLane * 32];
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) warp_acc[warp][lane + 32 * r] = acc[r];
  __syncthreads();
  float m_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
  float l_all = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    if (warp_m[w] != -INFINITY) l_all += warp_l[w] * __expf(warp_m[w] - m_all);
  }
  for (int64_t i = threadIdx.x; i < s.head_dim; i += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (warp_m[w] != -INFINITY) sum += warp_acc[w][i] * __expf(warp_m[w] - m_all);
    }
    out[task * s.head_dim + i] = from_f32<T>(sum / l_all);
  }
}

}  // namespace

void write_cache(const Tensor& cache, const Tensor& fresh, const Tensor& starts) {
  ops::cuda::check_kernel_dtype(cache, "kv cache write");
  const int64_t rows = fresh.size(0), tokens = fresh.size(1);
  const int64_t width = fresh.size(2) * fresh.size(3);
  if (fresh.numel() == 0) return;
  ::lt::cuda::DeviceGuard guard(cache.device().index);
  cudaStream_t stream = ops::cuda::stream_for(cache.device());
  constexpr int kThreads = 256;
  ops::cuda::dispatch_kernel_dtype(cache.dtype(), [&](auto tag) {
    using T = decltype(tag);
    write_cache_kernel<T><<<ops::cuda::grid_for(fresh.numel(), kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(cache.data_ptr()), static_cast<const T*>(fresh.data_ptr()),
        static_cast<const int64_t*>(starts.data_ptr()), rows, tokens, cache.size(1), width);
  });
  LT_CUDA_CHECK(cudaGetLastError());
}

Tensor cached_attention(const Tensor& q_in, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& starts, double scale) {
  ops::cuda::check_kernel_dtype(q_in, "cached attention");
  LT_CHECK(q_in.dtype() == k_cache.dtype(), "cached attention: q ", q_in.str(), " and cache ",
           k_cache.str(), " differ in dtype");
  LT_CHECK(q_in.size(3) <= 32 * kMaxPerLane, "cached attention: head_dim ", q_in.size(3),
           " is above the kernel's ", 32 * kMaxPerLane);
  const Tensor q = ops::cuda::dense(q_in);
  Tensor out = Tensor::empty(q.shape(), q.dtype(), q.device());
  const int64_t tasks = q.size(0) * q.size(1) * q.size(2);
  if (tasks == 0) return out;
  LT_CHECK(tasks <= 0x7fffffff, "cached attention: ", tasks, " rows exceed the grid");
  AttentionShape s{q.size(1), q.size(2),       k_cache.size(2),
                   q.size(3), k_cache.size(1), static_cast<float>(scale)};
  ::lt::cuda::DeviceGuard guard(q.device().index);
  cudaStream_t stream = ops::cuda::stream_for(q.device());
  ops::cuda::dispatch_kernel_dtype(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cached_attention_kernel<T><<<static_cast<unsigned>(tasks), kWarps * 32, 0, stream>>>(
        static_cast<const T*>(q.data_ptr()), static_cast<const T*>(k_cache.data_ptr()),
        static_cast<const T*>(v_cache.data_ptr()), static_cast<const int64_t*>(starts.data_ptr()),
        static_cast<T*>(out.data_ptr()), s);
  });
  LT_CUDA_CHECK(cudaGetLastError());
  return out;
}

}  // namespace lt::nn::cuda
