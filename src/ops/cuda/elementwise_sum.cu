// Sums over dimensions on the GPU (ops::sum and hence sum_to, which the
// backward passes of broadcasting ops use). See ops/cuda/elementwise.h.
#include "ops/cuda/column_sum.cuh"
#include "ops/cuda/elementwise.h"

namespace lt::ops::cuda {

namespace {

// Reduced dims that are the innermost of a dense tensor: one block per
// output, reading its contiguous run of `len` elements.
template <typename T, bool kPacked>
__global__ void row_sum(const T* a, int64_t len, T* out) {
  __shared__ float scratch[32];
  const T* row = a + static_cast<int64_t>(blockIdx.x) * len;
  float s = 0.0f;
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    constexpr int P = Pack<T>::kSize;
    for (int64_t p = threadIdx.x; p < len / P; p += blockDim.x) {
      const Pack<T> v = load_pack(row + p * P);
#pragma unroll
      for (int j = 0; j < P; ++j) s += to_f32(v.v[j]);
    }
    scalar_from = len / P * P;
  }
  for (int64_t i = scalar_from + threadIdx.x; i < len; i += blockDim.x) s += to_f32(row[i]);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = from_f32<T>(s);
}

// Reduced dims in the middle (or leading) of a dense [outer, rows, inner].
template <typename T>
struct MiddleTerm {
  const T* a;
  int64_t rows, inner;
  __device__ float operator()(int64_t o, int64_t r, int64_t c) const {
    return to_f32(a[(o * rows + r) * inner + c]);
  }
};

// Anything else (strided inputs, reduced dims not adjacent): one thread per
// output, walking its reduced elements by index decomposition. Slow, but
// only unusual layouts take it.
constexpr int kMaxRank = 8;
struct Walk {
  int rank = 0;
  int64_t size[kMaxRank];
  int64_t stride[kMaxRank];
  __device__ int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      off += (i % size[d]) * stride[d];
      i /= size[d];
    }
    return off;
  }
};

template <typename T>
__global__ void strided_sum(const T* a, Walk kept, Walk reduced, int64_t outputs, int64_t len,
                            T* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += stride) {
    const T* base = a + kept.offset(o);
    float s = 0.0f;
    for (int64_t j = 0; j < len; ++j) s += to_f32(base[reduced.offset(j)]);
    out[o] = from_f32<T>(s);
  }
}

Walk walk_of(const Shape& size, const Shape& stride, const char* what) {
  LT_CHECK(size.size() <= static_cast<size_t>(kMaxRank), "CUDA sum: ", size.size(), " ", what,
           " dims, more than ", kMaxRank);
  Walk w;
  w.rank = static_cast<int>(size.size());
  for (int d = 0; d < w.rank; ++d) {
    w.size[d] = size[d];
    w.stride[d] = stride[d];
  }
  return w;
}

template <typename T>
void launch_sum(const Tensor& a, const std::vector<bool>& reduced, const Tensor& out) {
  const auto* pa = static_cast<const T*>(a.data_ptr());
  auto* po = static_cast<T*>(out.data_ptr());
  const Device device = a.device();
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(device);

  // Dims of size 1 change nothing; what is left is dense [outer, len, inner]
  // when the reduced dims are adjacent.
  Shape kept_size, kept_stride, red_size, red_stride;
  int first_red = -1, last_red = -1, rank = 0;
  int64_t outer = 1, len = 1, inner = 1;
  for (size_t d = 0; d < reduced.size(); ++d) {
    const int64_t s = a.shape()[d];
    if (s == 1) continue;
    if (reduced[d]) {
      red_size.push_back(s);
      red_stride.push_back(a.strides()[d]);
      if (first_red < 0) first_red = rank;
      last_red = rank;
      len *= s;
    } else {
      kept_size.push_back(s);
      kept_stride.push_back(a.strides()[d]);
      (first_red < 0 ? outer : inner) *= s;
    }
    ++rank;
  }
  const bool adjacent =
      first_red < 0 || last_red - first_red + 1 == static_cast<int>(red_size.size());
  constexpr int kThreads = 256;
  if (a.is_contiguous() && adjacent && inner == 1) {
    const int threads = row_threads(len, Pack<T>::kSize);
    const bool packed = len % Pack<T>::kSize == 0 && aligned16(pa);
    LT_CHECK(outer <= 0x7fffffff, "CUDA sum: ", outer, " rows exceed the grid");
    if (packed) {
      row_sum<T, true><<<static_cast<unsigned>(outer), threads, 0, stream>>>(pa, len, po);
    } else {
      row_sum<T, false><<<static_cast<unsigned>(outer), threads, 0, stream>>>(pa, len, po);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  } else if (a.is_contiguous() && adjacent && outer <= 65535) {
    launch_column_sum<T>(MiddleTerm<T>{pa, len, inner}, outer, len, inner, po, device);
  } else {
    const Walk kept = walk_of(kept_size, kept_stride, "kept");
    const Walk red = walk_of(red_size, red_stride, "reduced");
    strided_sum<T><<<grid_for(out.numel(), kThreads), kThreads, 0, stream>>>(pa, kept, red,
                                                                             out.numel(), len, po);
    LT_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape) {
  check_kernel_dtype(a, "sum");
  LT_CHECK(reduced.size() == a.shape().size(), "CUDA sum: ", reduced.size(), " flags for ",
           a.str());
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  int64_t len = 1;
  for (size_t d = 0; d < reduced.size(); ++d) len *= reduced[d] ? a.shape()[d] : 1;
  if (len == 0) {
    // An empty sum is 0, and +0.0 is all-zero bits in f32 and bf16.
    ::lt::cuda::DeviceGuard guard(a.device().index);
    LT_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream_for(a.device())));
    return out;
  }
  dispatch_kernel_dtype(a.dtype(), [&](auto tag) { launch_sum<decltype(tag)>(a, reduced, out); });
  return out;
}

}  // namespace lt::ops::cuda
