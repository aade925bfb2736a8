// RMSNorm forward and backward on the GPU, with ops/norm.cpp's numerics:
// f32 statistics, and for bf16 the normalized x rounded to bf16 before the
// weight multiply (Hugging Face's LlamaRMSNorm), so the two roundings match.
#include "ops/cuda/column_sum.cuh"
#include "ops/cuda/norm.h"

namespace lt::ops::cuda {

namespace {

template <typename T, bool kPacked>
__global__ void rms_norm_rows(const T* x, const T* w, T* y, float* rstd, int64_t cols, float eps) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * cols;
  float ss = 0.0f;
  row_visit<T, kPacked, 1>({xr}, cols, [&](const float(&v)[1]) { ss += v[0] * v[0]; });
  ss = block_sum(ss, scratch);
  const float rs = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
  if (threadIdx.x == 0) rstd[r] = rs;
  row_write<T, kPacked, 2>({xr, w}, y + r * cols, cols, [&](const float(&v)[2]) {
    // Rounds through T (a no-op for f32): HF casts x * rstd to the input
    // dtype before multiplying by the weight.
    return to_f32(from_f32<T>(v[0] * rs)) * v[1];
  });
}

// With n = x r and dn = dy w:  dx = r (dn - n mean(dn n)). Without a
// weight, `w` aliases dy and is ignored.
template <typename T, bool kPacked>
__global__ void rms_norm_backward_rows(const T* dy, const T* x, const T* w, bool has_w,
                                       const float* rstd, T* dx, int64_t cols) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T* gr = dy + r * cols;
  const T* xr = x + r * cols;
  const float rs = rstd[r];
  float dot = 0.0f;
  row_visit<T, kPacked, 3>({gr, xr, has_w ? w : gr}, cols, [&](const float(&v)[3]) {
    dot += v[0] * (has_w ? v[2] : 1.0f) * (v[1] * rs);
  });
  const float m = block_sum(dot, scratch) / static_cast<float>(cols);
  row_write<T, kPacked, 3>({gr, xr, has_w ? w : gr}, dx + r * cols, cols, [&](const float(&v)[3]) {
    const float dn = v[0] * (has_w ? v[2] : 1.0f);
    return rs * (dn - v[1] * rs * m);
  });
}

// dweight = sum over rows of dy * x * rstd.
template <typename T>
struct RmsWeightTerm {
  const T* dy;
  const T* x;
  const float* rstd;
  int64_t cols;
  __device__ float operator()(int64_t, int64_t r, int64_t c) const {
    const int64_t i = r * cols + c;
    return to_f32(dy[i]) * to_f32(x[i]) * rstd[r];
  }
};

}  // namespace

RmsNormOutput rms_norm(const Tensor& x_in, const Tensor& weight, double eps) {
  check_kernel_dtype(x_in, "rms_norm");
  const Tensor x = dense(x_in), w = dense(weight);
  const int64_t cols = x.size(-1);
  const Shape stat_shape(x.shape().begin(), x.shape().end() - 1);
  RmsNormOutput out{Tensor::empty(x.shape(), x.dtype(), x.device()),
                    Tensor::empty(stat_shape, DType::F32, x.device())};
  if (x.numel() == 0) return out;
  ::lt::cuda::DeviceGuard guard(x.device().index);
  dispatch_kernel_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const RowLaunch l = row_launch_for(x, Pack<T>::kSize, "norm");
    const auto* px = static_cast<const T*>(x.data_ptr());
    const auto* pw = static_cast<const T*>(w.data_ptr());
    auto* py = static_cast<T*>(out.y.data_ptr());
    auto* pr = static_cast<float*>(out.rstd.data_ptr());
    const auto e = static_cast<float>(eps);
    if (cols % Pack<T>::kSize == 0 && all_aligned16({px, pw, py})) {
      rms_norm_rows<T, true><<<l.rows, l.threads, 0, l.stream>>>(px, pw, py, pr, cols, e);
    } else {
      rms_norm_rows<T, false><<<l.rows, l.threads, 0, l.stream>>>(px, pw, py, pr, cols, e);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  });
  return out;
}

RmsNormGrads rms_norm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& weight,
                               const Tensor& rstd_in, bool need_dx, bool need_dweight) {
  check_kernel_dtype(x_in, "rms_norm_backward");
  const Tensor x = dense(x_in), rstd = dense(rstd_in);
  const Tensor dy = dense(dy_in.dtype() == x.dtype() ? dy_in : dy_in.to(x.dtype()));
  const Tensor w = weight.defined() ? dense(weight) : Tensor();
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  RmsNormGrads grads;
  if (need_dx) grads.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (need_dweight) grads.dweight = Tensor::empty({cols}, weight.dtype(), x.device());
  ::lt::cuda::DeviceGuard guard(x.device().index);
  dispatch_kernel_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto* px = static_cast<const T*>(x.data_ptr());
    const auto* pg = static_cast<const T*>(dy.data_ptr());
    const auto* pr = static_cast<const float*>(rstd.data_ptr());
    if (need_dx && rows > 0) {
      const RowLaunch l = row_launch_for(x, Pack<T>::kSize, "norm");
      const auto* pw = w.defined() ? static_cast<const T*>(w.data_ptr()) : pg;
      auto* pd = static_cast<T*>(grads.dx.data_ptr());
      if (cols % Pack<T>::kSize == 0 && all_aligned16({px, pg, pw, pd})) {
        rms_norm_backward_rows<T, true>
            <<<l.rows, l.threads, 0, l.stream>>>(pg, px, pw, w.defined(), pr, pd, cols);
      } else {
        rms_norm_backward_rows<T, false>
            <<<l.rows, l.threads, 0, l.stream>>>(pg, px, pw, w.defined(), pr, pd, cols);
      }
      LT_CUDA_CHECK(cudaGetLastError());
    }
    if (need_dweight) {
      // The caller checked that the weight has x's dtype.
      launch_column_sum<T>(RmsWeightTerm<T>{pg, px, pr, cols}, 1, rows, cols,
                           static_cast<T*>(grads.dweight.data_ptr()), x.device());
    }
  });
  return grads;
}

}  // namespace lt::ops::cuda
