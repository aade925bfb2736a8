// Rotary position embedding on the GPU (Hugging Face's rotate_half
// convention; see ops/rope.h). The cos/sin tables stay on the device in
// the dtype they were made in (f64 from rope_cos_sin) and are read per
// element; x computes in f32.
#include "ops/cuda/kernel_common.cuh"
#include "ops/cuda/rope.h"

namespace lt::ops::cuda {

namespace {

struct RopeShape {
  int64_t batch, tokens, heads, half;
  const void* positions;  // nullptr: token t sits at position t
  bool positions64;
  int64_t batch_stride;  // of positions: 0 for [T], T for [B, T]
  float sign;
};

// Work item = one group of G pairs (j, j + half) of one head of one token:
// G = a pack when kPacked (then half % G == 0 and x, y are aligned), else 1.
template <typename T, typename Tab, bool kPacked>
__global__ void rotary_kernel(const T* x, const Tab* cos, const Tab* sin, T* y, RopeShape s) {
  constexpr int G = kPacked ? Pack<T>::kSize : 1;
  const int64_t groups = s.half / G;
  const int64_t items = s.batch * s.tokens * s.heads * groups;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < items;
       w += stride) {
    const int64_t g = w % groups;
    const int64_t row = w / groups;  // (b * T + t) * H + h
    const int64_t bt = row / s.heads;
    const int64_t b = bt / s.tokens, t = bt % s.tokens;
    int64_t p = t;
    if (s.positions) {
      const int64_t k = b * s.batch_stride + t;
      p = s.positions64 ? static_cast<const int64_t*>(s.positions)[k]
                        : static_cast<const int32_t*>(s.positions)[k];
    }
    const T* xr = x + row * 2 * s.half;
    T* yr = y + row * 2 * s.half;
    const int64_t j0 = g * G;
    const Tab* cr = cos + p * s.half + j0;
    const Tab* sr = sin + p * s.half + j0;
    if constexpr (kPacked) {
      const Pack<T> lo = load_pack(xr + j0), hi = load_pack(xr + s.half + j0);
      Pack<T> out_lo, out_hi;
#pragma unroll
      for (int j = 0; j < G; ++j) {
        const float c = static_cast<float>(cr[j]), sn = static_cast<float>(s.sign * sr[j]);
        const float a = to_f32(lo.v[j]), bv = to_f32(hi.v[j]);
        out_lo.v[j] = from_f32<T>(a * c - bv * sn);
        out_hi.v[j] = from_f32<T>(bv * c + a * sn);
      }
      store_pack(yr + j0, out_lo);
      store_pack(yr + s.half + j0, out_hi);
    } else {
      const float c = static_cast<float>(cr[0]), sn = static_cast<float>(s.sign * sr[0]);
      const float a = to_f32(xr[j0]), bv = to_f32(xr[s.half + j0]);
      yr[j0] = from_f32<T>(a * c - bv * sn);
      yr[s.half + j0] = from_f32<T>(bv * c + a * sn);
    }
  }
}

template <typename T, typename Tab>
void launch_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& y,
                   const RopeShape& s) {
  const auto* px = static_cast<const T*>(x.data_ptr());
  auto* py = static_cast<T*>(y.data_ptr());
  const auto* pc = static_cast<const Tab*>(cos.data_ptr());
  const auto* ps = static_cast<const Tab*>(sin.data_ptr());
  cudaStream_t stream = stream_for(x.device());
  constexpr int kThreads = 256;
  const int64_t pairs = s.batch * s.tokens * s.heads * s.half;
  if (s.half % Pack<T>::kSize == 0 && aligned16(px) && aligned16(py)) {
    rotary_kernel<T, Tab, true>
        <<<grid_for(pairs / Pack<T>::kSize, kThreads), kThreads, 0, stream>>>(px, pc, ps, py, s);
  } else {
    rotary_kernel<T, Tab, false>
        <<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(px, pc, ps, py, s);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

Tensor rotary(const Tensor& x_in, const Tensor& cos_in, const Tensor& sin_in,
              const Tensor& positions, double sign) {
  check_kernel_dtype(x_in, "rotary");
  const Tensor x = dense(x_in);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return y;
  // Tables are read in their own dtype when it is f64 or f32.
  const bool f64 = cos_in.dtype() == DType::F64 && sin_in.dtype() == DType::F64;
  const DType table_dtype = f64 ? DType::F64 : DType::F32;
  const Tensor cos = dense(cos_in.to(table_dtype)), sin = dense(sin_in.to(table_dtype));
  const Tensor pos = positions.defined() ? dense(positions) : Tensor();
  RopeShape s{x.size(0),
              x.size(1),
              x.size(2),
              x.size(3) / 2,
              pos.defined() ? pos.data_ptr() : nullptr,
              pos.defined() && pos.dtype() == DType::I64,
              pos.defined() && pos.dim() == 2 ? x.size(1) : 0,
              static_cast<float>(sign)};
  ::lt::cuda::DeviceGuard guard(x.device().index);
  dispatch_kernel_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (f64) {
      launch_rotary<T, double>(x, cos, sin, y, s);
    } else {
      launch_rotary<T, float>(x, cos, sin, y, s);
    }
  });
  return y;
}

}  // namespace lt::ops::cuda
