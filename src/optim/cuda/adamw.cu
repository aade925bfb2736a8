#include "optim/cuda/adamw.h"

#include "ops/cuda/kernel_common.cuh"
#include "optim/cuda/adamw_update.cuh"

namespace lt::optim::cuda {

namespace {

using ops::cuda::bf16;
using ops::cuda::Pack;

// Elements per thread per iteration of the packed loop: one 16-byte pack of
// f32 (4) is the unit for p, m and v; 8 elements keep a bf16 gradient to a
// full 16-byte pack as well.
constexpr int kVec = 8;
constexpr int kThreads = 256;

// Loads kVec gradient values starting at g (16-byte aligned) as f32.
__device__ __forceinline__ void load_grads(const float* g, float (&out)[kVec]) {
#pragma unroll
  for (int h = 0; h < kVec / 4; ++h) {
    const Pack<float> pk = ops::cuda::load_pack(g + 4 * h);
#pragma unroll
    for (int j = 0; j < 4; ++j) out[4 * h + j] = pk.v[j];
  }
}
__device__ __forceinline__ void load_grads(const bf16* g, float (&out)[kVec]) {
  const Pack<bf16> pk = ops::cuda::load_pack(g);
#pragma unroll
  for (int j = 0; j < kVec; ++j) out[j] = __bfloat162float(pk.v[j]);
}

// kPacked: every pointer is 16-byte aligned, and elements [0, n / kVec *
// kVec) go through 16-byte loads and stores; the rest (and everything when
// not packed) element by element. A grid-stride loop over both parts.
template <typename Grad, bool kPacked>
__global__ void adamw_kernel(AdamWScalars s, float* __restrict__ param,
                             const Grad* __restrict__ grad, float* __restrict__ exp_avg,
                             float* __restrict__ exp_avg_sq, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    const int64_t vecs = n / kVec;
    for (int64_t k = first; k < vecs; k += stride) {
      const int64_t i = k * kVec;
      float g[kVec];
      load_grads(grad + i, g);
#pragma unroll
      for (int h = 0; h < kVec / 4; ++h) {
        Pack<float> p = ops::cuda::load_pack(param + i + 4 * h);
        Pack<float> m = ops::cuda::load_pack(exp_avg + i + 4 * h);
        Pack<float> v = ops::cuda::load_pack(exp_avg_sq + i + 4 * h);
#pragma unroll
        for (int j = 0; j < 4; ++j) update_one(s, p.v[j], g[4 * h + j], m.v[j], v.v[j]);
        ops::cuda::store_pack(param + i + 4 * h, p);
        ops::cuda::store_pack(exp_avg + i + 4 * h, m);
        ops::cuda::store_pack(exp_avg_sq + i + 4 * h, v);
      }
    }
    scalar_from = vecs * kVec;
  }
  for (int64_t i = scalar_from + first; i < n; i += stride) {
    float p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
    update_one(s, p, widen(grad[i]), m, v);
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

template <typename Grad>
void launch(const AdamWScalars& s, float* p, const Grad* g, float* m, float* v, int64_t n,
            cudaStream_t stream) {
  using ops::cuda::aligned16;
  using ops::cuda::grid_for;
  if (aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v) && n >= kVec) {
    adamw_kernel<Grad, true>
        <<<grid_for(n / kVec, kThreads), kThreads, 0, stream>>>(s, p, g, m, v, n);
  } else {
    adamw_kernel<Grad, false><<<grid_for(n, kThreads), kThreads, 0, stream>>>(s, p, g, m, v, n);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void adamw_update(const AdamWScalars& s, const Tensor& param, const Tensor& grad,
                  const Tensor& exp_avg, const Tensor& exp_avg_sq) {
  const int64_t n = param.numel();
  if (n == 0) return;
  ::lt::cuda::DeviceGuard guard(param.device().index);
  cudaStream_t stream = ops::cuda::stream_for(param.device());
  auto* p = static_cast<float*>(param.data_ptr());
  auto* m = static_cast<float*>(exp_avg.data_ptr());
  auto* v = static_cast<float*>(exp_avg_sq.data_ptr());
  if (grad.dtype() == DType::BF16) {
    launch(s, p, static_cast<const bf16*>(grad.data_ptr()), m, v, n, stream);
  } else {
    launch(s, p, static_cast<const float*>(grad.data_ptr()), m, v, n, stream);
  }
}

}  // namespace lt::optim::cuda
