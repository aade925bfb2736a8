// Softmax over the last dimension and its backward on the GPU: one block
// per row, f32 statistics, 16-byte packs when rows are aligned.
#include "ops/cuda/activations.h"
#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

namespace {

template <typename T, bool kPacked>
__global__ void softmax_rows(const T* x, T* y, int64_t cols) {
  __shared__ float scratch_m[32], scratch_s[32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * cols;
  T* yr = y + r * cols;
  // One pass for max and sum of exp(x - max) (rescaled as the max grows),
  // a second to write: the row is read twice, not three times.
  MaxSum acc;
  row_visit<T, kPacked, 1>({xr}, cols, [&](const float(&v)[1]) { add_to(acc, v[0]); });
  acc = block_max_sum(acc, scratch_m, scratch_s);
  const float inv = 1.0f / acc.s;
  row_write<T, kPacked, 1>({xr}, yr, cols,
                           [&](const float(&v)[1]) { return __expf(v[0] - acc.m) * inv; });
}

// dx = y * (g - sum(g * y)).
template <typename T, bool kPacked>
__global__ void softmax_backward_rows(const T* g, const T* y, T* dx, int64_t cols) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T* gr = g + r * cols;
  const T* yr = y + r * cols;
  T* dr = dx + r * cols;
  float dot = 0.0f;
  row_visit<T, kPacked, 2>({gr, yr}, cols, [&](const float(&v)[2]) { dot += v[0] * v[1]; });
  dot = block_sum(dot, scratch);
  row_write<T, kPacked, 2>({gr, yr}, dr, cols,
                           [&](const float(&v)[2]) { return v[1] * (v[0] - dot); });
}

}  // namespace

Tensor softmax_last(const Tensor& x_in) {
  check_kernel_dtype(x_in, "softmax");
  Tensor x = dense(x_in);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t cols = x.size(-1);
  if (x.numel() == 0) return y;
  ::lt::cuda::DeviceGuard guard(x.device().index);
  dispatch_kernel_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const RowLaunch l = row_launch_for(x, Pack<T>::kSize, "softmax");
    const auto* px = static_cast<const T*>(x.data_ptr());
    auto* py = static_cast<T*>(y.data_ptr());
    if (cols % Pack<T>::kSize == 0 && aligned16(px) && aligned16(py)) {
      softmax_rows<T, true><<<l.rows, l.threads, 0, l.stream>>>(px, py, cols);
    } else {
      softmax_rows<T, false><<<l.rows, l.threads, 0, l.stream>>>(px, py, cols);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  });
  return y;
}

Tensor softmax_backward_last(const Tensor& grad_out, const Tensor& y_in) {
  check_kernel_dtype(y_in, "softmax_backward");
  Tensor y = dense(y_in);
  Tensor g = dense(grad_out.dtype() == y.dtype() ? grad_out : grad_out.to(y.dtype()));
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  const int64_t cols = y.size(-1);
  if (y.numel() == 0) return dx;
  ::lt::cuda::DeviceGuard guard(y.device().index);
  dispatch_kernel_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const RowLaunch l = row_launch_for(y, Pack<T>::kSize, "softmax_backward");
    const auto* pg = static_cast<const T*>(g.data_ptr());
    const auto* py = static_cast<const T*>(y.data_ptr());
    auto* pd = static_cast<T*>(dx.data_ptr());
    if (cols % Pack<T>::kSize == 0 && aligned16(pg) && aligned16(py) && aligned16(pd)) {
      softmax_backward_rows<T, true><<<l.rows, l.threads, 0, l.stream>>>(pg, py, pd, cols);
    } else {
      softmax_backward_rows<T, false><<<l.rows, l.threads, 0, l.stream>>>(pg, py, pd, cols);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  });
  return dx;
}

}  // namespace lt::ops::cuda
