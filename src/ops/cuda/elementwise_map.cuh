#pragma once
// out[i] = f(in0[i], in1[i], ...) over same-shape dense tensors of one
// dtype, computed in f32. The functor `f` is a struct with a __device__
// operator()(float...) -> float (no extended lambdas: the build does not
// turn them on). 16-byte packs when every pointer is aligned, with a
// scalar tail; scalar throughout otherwise.
#include <array>

#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

template <typename T, int K>
struct Inputs {
  const T* p[K];
};

template <typename F, typename T, int K>
__device__ __forceinline__ float apply_at(const F& f, const Inputs<T, K>& in, int64_t i) {
  if constexpr (K == 1) {
    return f(to_f32(in.p[0][i]));
  } else if constexpr (K == 2) {
    return f(to_f32(in.p[0][i]), to_f32(in.p[1][i]));
  } else {
    static_assert(K == 3, "map kernels take one to three inputs");
    return f(to_f32(in.p[0][i]), to_f32(in.p[1][i]), to_f32(in.p[2][i]));
  }
}

template <typename T, int K, typename F, bool kPacked>
__global__ void map_kernel(F f, Inputs<T, K> in, T* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    constexpr int P = Pack<T>::kSize;
    const int64_t packs = n / P;
    for (int64_t p = tid; p < packs; p += stride) {
      Pack<T> v[K];
#pragma unroll
      for (int k = 0; k < K; ++k) v[k] = load_pack(in.p[k] + p * P);
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        if constexpr (K == 1) {
          o.v[j] = from_f32<T>(f(to_f32(v[0].v[j])));
        } else if constexpr (K == 2) {
          o.v[j] = from_f32<T>(f(to_f32(v[0].v[j]), to_f32(v[1].v[j])));
        } else {
          o.v[j] = from_f32<T>(f(to_f32(v[0].v[j]), to_f32(v[1].v[j]), to_f32(v[2].v[j])));
        }
      }
      store_pack(out + p * P, o);
    }
    scalar_from = packs * P;
  }
  for (int64_t i = scalar_from + tid; i < n; i += stride) out[i] = from_f32<T>(apply_at(f, in, i));
}

// Launches the map on the current stream of `out`'s device; `inputs` and
// `out` are dense, of dtype T, with out.numel() elements each.
template <typename T, int K, typename F>
void launch_map(const F& f, const std::array<Tensor, K>& inputs, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  Inputs<T, K> in;
  bool packed = aligned16(out.data_ptr());
  for (int k = 0; k < K; ++k) {
    in.p[k] = static_cast<const T*>(inputs[k].data_ptr());
    packed = packed && aligned16(in.p[k]);
  }
  T* po = static_cast<T*>(out.data_ptr());
  ::lt::cuda::DeviceGuard guard(out.device().index);
  cudaStream_t stream = stream_for(out.device());
  constexpr int kThreads = 256;
  if (packed) {
    map_kernel<T, K, F, true>
        <<<grid_for(n / Pack<T>::kSize + 1, kThreads), kThreads, 0, stream>>>(f, in, po, n);
  } else {
    map_kernel<T, K, F, false><<<grid_for(n, kThreads), kThreads, 0, stream>>>(f, in, po, n);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lt::ops::cuda
