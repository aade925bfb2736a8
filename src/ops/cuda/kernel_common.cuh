#pragma once
// What every op kernel in ops/cuda shares: the two storage types (f32 and
// bf16, both computed in f32), 16-byte packs, warp and block reductions,
// and the host-side launch helpers (stream, device, dtype checks).
//
// Numerics: every kernel loads its inputs as f32, computes in f32 and rounds
// once on store (round to nearest even, as lt::f32_to_bf16 does on the
// CPU), so a bf16 result differs from the CPU backend's only by the order
// of f32 accumulations.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/stream.h"
#include "core/tensor.h"

namespace lt::ops::cuda {

using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------- device side

__device__ __forceinline__ float to_f32(float v) {
  return v;
}
__device__ __forceinline__ float to_f32(bf16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

// One 16-byte load or store: 4 f32 or 8 bf16. Used only where the caller
// has checked that the address is 16-byte aligned.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& pack) {
  *reinterpret_cast<Pack<T>*>(p) = pack;
}

// The reducers of warp_reduce/block_reduce.
struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// op over the 32 lanes of a warp (butterfly: every lane gets the result).
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  return warp_reduce(v, SumOp{});
}
__device__ __forceinline__ float warp_max(float v) {
  return warp_reduce(v, MaxOp{});
}

// op over the block, returned to every thread; `identity` fills the lanes
// past the last warp. The order of operations depends only on blockDim, so
// results are reproducible run to run. `scratch` holds 32 T in shared
// memory; calls may follow each other with the same scratch (the leading
// barrier keeps them apart).
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, T identity, T* scratch, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  return warp_reduce(v, op);
}
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, 0.0f, scratch, SumOp{});
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, -INFINITY, scratch, MaxOp{});
}

// A running (max, sum of exp(x - max)) pair, for one-pass logsumexp.
struct MaxSum {
  float m = -INFINITY;
  float s = 0.0f;
};
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  // exp(-inf - -inf) would be NaN; an empty side contributes nothing.
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}
__device__ __forceinline__ void add_to(MaxSum& acc, float x) {
  if (x > acc.m) {
    acc.s = acc.s * __expf(acc.m - x) + 1.0f;
    acc.m = x;
  } else if (x != -INFINITY) {  // a -inf (masked) element adds 0, not exp(-inf + inf) = NaN
    acc.s += __expf(x - acc.m);
  }
}
__device__ __forceinline__ MaxSum block_max_sum(MaxSum v, float* scratch_m, float* scratch_s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
    v = combine(v, o);
  }
  __syncthreads();
  if (lane == 0) {
    scratch_m[warp] = v.m;
    scratch_s[warp] = v.s;
  }
  __syncthreads();
  v = lane < warps ? MaxSum{scratch_m[lane], scratch_s[lane]} : MaxSum{};
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
    v = combine(v, o);
  }
  return v;
}

// ---------------------------------------------------------------- row loops
// Kernels that give one block to each row walk the row with these: 16-byte
// packs strided by the block (when kPacked: the row length is a multiple of
// the pack and every row pointer is aligned), then a scalar tail. K rows
// of the same length are read side by side; fn sees their K values at one
// column as f32.

template <typename T, int K>
struct Rows {
  const T* p[K];
};

// fn(const float (&v)[K]) for each column this thread owns.
template <typename T, bool kPacked, int K, typename Fn>
__device__ __forceinline__ void row_visit(const Rows<T, K>& in, int64_t cols, Fn&& fn) {
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    constexpr int P = Pack<T>::kSize;
    for (int64_t p = threadIdx.x; p < cols / P; p += blockDim.x) {
      Pack<T> pk[K];
#pragma unroll
      for (int k = 0; k < K; ++k) pk[k] = load_pack(in.p[k] + p * P);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        float v[K];
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = to_f32(pk[k].v[j]);
        fn(v);
      }
    }
    scalar_from = cols / P * P;
  }
  for (int64_t c = scalar_from + threadIdx.x; c < cols; c += blockDim.x) {
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = to_f32(in.p[k][c]);
    fn(v);
  }
}

// out[c] = fn(const float (&v)[K]) for each column this thread owns.
template <typename T, bool kPacked, int K, typename Fn>
__device__ __forceinline__ void row_write(const Rows<T, K>& in, T* out, int64_t cols, Fn&& fn) {
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    constexpr int P = Pack<T>::kSize;
    for (int64_t p = threadIdx.x; p < cols / P; p += blockDim.x) {
      Pack<T> pk[K];
#pragma unroll
      for (int k = 0; k < K; ++k) pk[k] = load_pack(in.p[k] + p * P);
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        float v[K];
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = to_f32(pk[k].v[j]);
        o.v[j] = from_f32<T>(fn(v));
      }
      store_pack(out + p * P, o);
    }
    scalar_from = cols / P * P;
  }
  for (int64_t c = scalar_from + threadIdx.x; c < cols; c += blockDim.x) {
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = to_f32(in.p[k][c]);
    out[c] = from_f32<T>(fn(v));
  }
}

// ---------------------------------------------------------------- host side

// The calling thread's current stream on `device` (kernels launch there).
inline cudaStream_t stream_for(Device device) {
  return static_cast<cudaStream_t>(current_stream(device).handle());
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Kernels exist for f32 and bf16 only: f64 is the CPU's reference type and
// f16 is not used by any model family here.
inline void check_kernel_dtype(const Tensor& t, const char* op) {
  LT_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, op,
           ": CUDA kernels take f32 or bf16 tensors, got ", t.str(),
           " (f64 is for CPU references; move it to the CPU or cast it)");
}

// `t` as a dense row-major tensor on its device. Non-contiguous inputs go
// through Tensor::contiguous() (a device copy), which names the tensor if
// this build cannot copy it.
inline Tensor dense(const Tensor& t) {
  return t.is_contiguous() ? t : t.contiguous();
}

// Calls fn(T{}) with T = float or bf16 for `dtype`.
template <typename Fn>
decltype(auto) dispatch_kernel_dtype(DType dtype, Fn&& fn) {
  if (dtype == DType::BF16) return fn(bf16{});
  return fn(float{});
}

// Blocks for a grid-stride loop over `work` items with `threads` per block:
// enough to fill the GPU several times over, never more than the work.
inline unsigned grid_for(int64_t work, int threads) {
  // 132 SMs x 16 resident blocks of 128 threads on an H200; more blocks
  // than this only add scheduling.
  constexpr int64_t kMaxBlocks = 132 * 16;
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

// Threads per block for kernels that give one block to each row of `cols`
// elements: about one 16-byte pack per thread, as a multiple of a warp.
inline int row_threads(int64_t cols, int pack) {
  const int64_t want = (cols + pack - 1) / pack;
  if (want >= 1024) return 1024;
  return static_cast<int>(std::max<int64_t>(32, (want + 31) / 32 * 32));
}

// The launch of a one-block-per-row kernel over the rows of `x` (all dims
// but the last), on the current stream of x's device.
struct RowLaunch {
  unsigned rows;
  int threads;
  cudaStream_t stream;
};

inline RowLaunch row_launch_for(const Tensor& x, int pack, const char* op) {
  const int64_t cols = x.size(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  LT_CHECK(rows <= 0x7fffffff, op, ": ", rows, " rows exceed the grid");
  return {static_cast<unsigned>(rows), row_threads(cols, pack), stream_for(x.device())};
}

inline bool all_aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs) {
    if (!aligned16(p)) return false;
  }
  return true;
}

}  // namespace lt::ops::cuda
