// Elementwise arithmetic on the GPU: add/sub/mul/div with broadcasting,
// scale and axpby. See ops/cuda/elementwise.h.
#include "ops/cuda/elementwise.h"
#include "ops/cuda/elementwise_map.cuh"

namespace lt::ops::cuda {

namespace {

struct AddOp {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct SubOp {
  __device__ float operator()(float x, float y) const { return x - y; }
};
struct MulOp {
  __device__ float operator()(float x, float y) const { return x * y; }
};
struct DivOp {
  __device__ float operator()(float x, float y) const { return x / y; }
};

// Flat indexing for the two layouts the models produce: an operand that is
// dense and either has the output's shape (na == n) or is a trailing-dims
// broadcast of it, like a bias [C] or a position table [T, C] added to
// [B, T, C]; its element for output i is then i % na.
template <typename T, typename Op, bool kPacked>
__global__ void binary_flat(Op op, const T* a, int64_t na, const T* b, int64_t nb, T* out,
                            int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    // The host packs only when na and nb are multiples of the pack, so a
    // pack never wraps around a broadcast operand.
    constexpr int P = Pack<T>::kSize;
    for (int64_t p = tid; p < n / P; p += stride) {
      const int64_t i = p * P;
      const Pack<T> x = load_pack(a + (na == n ? i : i % na));
      const Pack<T> y = load_pack(b + (nb == n ? i : i % nb));
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < P; ++j) o.v[j] = from_f32<T>(op(to_f32(x.v[j]), to_f32(y.v[j])));
      store_pack(out + i, o);
    }
    scalar_from = n / P * P;
  }
  for (int64_t i = scalar_from + tid; i < n; i += stride) {
    out[i] = from_f32<T>(op(to_f32(a[na == n ? i : i % na]), to_f32(b[nb == n ? i : i % nb])));
  }
}

// Any broadcast and any strides: each output element finds its operands by
// decomposing its index. Dims are merged on the host first, so the common
// cases run with rank 1 or 2.
constexpr int kMaxRank = 8;
struct BroadcastLayout {
  int rank = 0;
  int64_t size[kMaxRank];
  int64_t stride_a[kMaxRank];
  int64_t stride_b[kMaxRank];
};

template <typename T, typename Op>
__global__ void binary_strided(Op op, const T* a, const T* b, T* out, BroadcastLayout layout,
                               int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int d = layout.rank - 1; d >= 0; --d) {
      const int64_t idx = rem % layout.size[d];
      rem /= layout.size[d];
      oa += idx * layout.stride_a[d];
      ob += idx * layout.stride_b[d];
    }
    out[i] = from_f32<T>(op(to_f32(a[oa]), to_f32(b[ob])));
  }
}

// True when `t` is dense and its shape, less leading 1s, is a suffix of `shape`.
bool is_trailing_broadcast(const Tensor& t, const Shape& shape) {
  if (!t.is_contiguous()) return false;
  Shape s = t.shape();
  while (!s.empty() && s.front() == 1) s.erase(s.begin());
  if (s.size() > shape.size()) return false;
  return std::equal(s.begin(), s.end(), shape.end() - static_cast<int64_t>(s.size()));
}

BroadcastLayout merged_layout(const Tensor& a, const Tensor& b, const Shape& shape) {
  const Shape sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
  BroadcastLayout layout;
  Shape size, ta, tb;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    // Merge into the previous dim when both operands step through the two
    // dims as through one.
    if (!size.empty() && ta.back() == sa[d] * shape[d] && tb.back() == sb[d] * shape[d]) {
      size.back() *= shape[d];
      ta.back() = sa[d];
      tb.back() = sb[d];
      continue;
    }
    size.push_back(shape[d]);
    ta.push_back(sa[d]);
    tb.push_back(sb[d]);
  }
  LT_CHECK(size.size() <= static_cast<size_t>(kMaxRank), "CUDA elementwise: broadcast of ", a.str(),
           " and ", b.str(), " needs ", size.size(), " dims, more than ", kMaxRank);
  layout.rank = static_cast<int>(size.size());
  for (int d = 0; d < layout.rank; ++d) {
    layout.size[d] = size[d];
    layout.stride_a[d] = ta[d];
    layout.stride_b[d] = tb[d];
  }
  return layout;
}

template <typename T, typename Op>
void launch_binary(Op op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const auto* pa = static_cast<const T*>(a.data_ptr());
  const auto* pb = static_cast<const T*>(b.data_ptr());
  auto* po = static_cast<T*>(out.data_ptr());
  ::lt::cuda::DeviceGuard guard(out.device().index);
  cudaStream_t stream = stream_for(out.device());
  constexpr int kThreads = 256;
  if (is_trailing_broadcast(a, out.shape()) && is_trailing_broadcast(b, out.shape()) &&
      a.numel() > 0 && b.numel() > 0) {
    constexpr int P = Pack<T>::kSize;
    const int64_t na = a.numel(), nb = b.numel();
    if (na % P == 0 && nb % P == 0 && aligned16(pa) && aligned16(pb) && aligned16(po)) {
      binary_flat<T, Op, true>
          <<<grid_for(n / P, kThreads), kThreads, 0, stream>>>(op, pa, na, pb, nb, po, n);
    } else {
      binary_flat<T, Op, false>
          <<<grid_for(n, kThreads), kThreads, 0, stream>>>(op, pa, na, pb, nb, po, n);
    }
  } else {
    binary_strided<T, Op><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        op, pa, pb, po, merged_layout(a, b, out.shape()), n);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

struct ScaleFn {
  float s;
  __device__ float operator()(float x) const { return x * s; }
};
struct AxpbyFn {
  float s, t;
  __device__ float operator()(float x, float y) const { return x * s + y * t; }
};

}  // namespace

Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  binary_into(kind, a, b, out);
  return out;
}

void binary_into(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& out) {
  check_kernel_dtype(a, "elementwise");
  LT_CHECK(out.is_contiguous() && out.dtype() == a.dtype(), "CUDA elementwise: output ", out.str(),
           " must be dense and of ", a.str(), "'s dtype");
  dispatch_kernel_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (kind) {
      case BinaryKind::Add:
        launch_binary<T>(AddOp{}, a, b, out);
        break;
      case BinaryKind::Sub:
        launch_binary<T>(SubOp{}, a, b, out);
        break;
      case BinaryKind::Mul:
        launch_binary<T>(MulOp{}, a, b, out);
        break;
      case BinaryKind::Div:
        launch_binary<T>(DivOp{}, a, b, out);
        break;
    }
  });
}

Tensor scale(const Tensor& a, double s) {
  check_kernel_dtype(a, "scale");
  Tensor x = dense(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  dispatch_kernel_dtype(a.dtype(), [&](auto tag) {
    launch_map<decltype(tag), 1>(ScaleFn{static_cast<float>(s)}, {x}, out);
  });
  return out;
}

Tensor axpby(const Tensor& a, double s, const Tensor& b, double t) {
  check_kernel_dtype(a, "axpby");
  Tensor x = dense(a), y = dense(b);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  dispatch_kernel_dtype(a.dtype(), [&](auto tag) {
    launch_map<decltype(tag), 2>(AxpbyFn{static_cast<float>(s), static_cast<float>(t)}, {x, y},
                                 out);
  });
  return out;
}

}  // namespace lt::ops::cuda
