// Strided copies with dtype conversion, and fills, on one GPU (see
// core/cuda/tensor_copy.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/cuda/tensor_copy.h"
#include "core/stream.h"

namespace lt::cuda {

namespace {

// Views reach the kernel with their dims merged wherever both step evenly,
// so a contiguous copy is rank 1 and a batched transpose rank 3; 8 merged
// dims is more than any view we make.
constexpr int kMaxDims = 8;

struct Layout {
  int rank = 0;
  int64_t size[kMaxDims];
  int64_t dst_stride[kMaxDims];
  int64_t src_stride[kMaxDims];
};

// Drops size-1 dims (never stepped along) and merges a dim into the one
// before it when stepping the outer dim once equals stepping the inner one
// through its whole extent, in both views.
Layout collapse(const Shape& shape, const int64_t* dst_strides, const int64_t* src_strides) {
  Layout l;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (l.rank > 0) {
      const int r = l.rank - 1;
      if (l.dst_stride[r] == dst_strides[i] * shape[i] &&
          l.src_stride[r] == src_strides[i] * shape[i]) {
        l.size[r] *= shape[i];
        l.dst_stride[r] = dst_strides[i];
        l.src_stride[r] = src_strides[i];
        continue;
      }
    }
    LT_CHECK(l.rank < kMaxDims, "GPU copy: the view of shape ", shape_str(shape), " has more than ",
             kMaxDims, " dims that do not merge");
    l.size[l.rank] = shape[i];
    l.dst_stride[l.rank] = dst_strides[i];
    l.src_stride[l.rank] = src_strides[i];
    ++l.rank;
  }
  return l;
}

template <typename W, typename S>
__device__ W widen(S s) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    return static_cast<W>(__bfloat162float(s));
  } else if constexpr (std::is_same_v<S, __half>) {
    return static_cast<W>(__half2float(s));
  } else {
    return static_cast<W>(s);
  }
}

template <typename D, typename W>
__device__ D narrow(W w) {
  if constexpr (std::is_same_v<D, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(w));
  } else if constexpr (std::is_same_v<D, __half>) {
    return __float2half_rn(static_cast<float>(w));
  } else {
    return static_cast<D>(w);
  }
}

// Through double only when one side is f64, so f32/bf16/f16 casts stay in
// f32 arithmetic.
template <typename D, typename S>
__device__ D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else {
    using W =
        std::conditional_t<std::is_same_v<D, double> || std::is_same_v<S, double>, double, float>;
    return narrow<D>(widen<W>(s));
  }
}

__device__ void offsets_of(const Layout& l, int64_t i, int64_t& dst, int64_t& src) {
  dst = 0;
  src = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const int64_t idx = i % l.size[d];
    i /= l.size[d];
    dst += idx * l.dst_stride[d];
    src += idx * l.src_stride[d];
  }
}

template <typename D, typename S>
__global__ void copy_kernel(D* dst, const S* src, Layout l, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t od, os;
    offsets_of(l, i, od, os);
    dst[od] = convert<D>(src[os]);
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, T value, Layout l, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t od, os;
    offsets_of(l, i, od, os);
    dst[od] = value;
  }
}

constexpr int kThreads = 256;

// Grid-stride loops: enough blocks to fill an H200 (132 SMs x 8 blocks of
// 256 threads) several times over, capped so huge tensors reuse threads.
unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 8192));
}

// Calls fn(T{}) with the CUDA type of a floating dtype.
template <typename Fn>
void dispatch_float(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32:
      fn(float{});
      return;
    case DType::F64:
      fn(double{});
      return;
    case DType::BF16:
      fn(__nv_bfloat16{});
      return;
    case DType::F16:
      fn(__half{});
      return;
    default:
      fail("GPU copy: no conversion from or to ", dtype_name(t));
  }
}

// Same-dtype copies move raw bits of the element's width.
template <typename Fn>
void dispatch_bits(size_t bytes, Fn&& fn) {
  switch (bytes) {
    case 1:
      fn(uint8_t{});
      return;
    case 2:
      fn(uint16_t{});
      return;
    case 4:
      fn(uint32_t{});
      return;
    case 8:
      fn(uint64_t{});
      return;
    default:
      fail("GPU copy: no element type of ", bytes, " bytes");
  }
}

cudaStream_t stream_of(int device) {
  return static_cast<cudaStream_t>(current_stream(Device::cuda(device)).handle());
}

}  // namespace

void strided_copy(int device, const Shape& shape, void* dst, DType dst_dtype,
                  const int64_t* dst_strides, const void* src, DType src_dtype,
                  const int64_t* src_strides) {
  const int64_t n = numel(shape);
  if (n == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(device);
  const Layout l = collapse(shape, dst_strides, src_strides);
  if (dst_dtype == src_dtype) {
    if (l.rank == 0 || (l.rank == 1 && l.dst_stride[0] == 1 && l.src_stride[0] == 1)) {
      LT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * dtype_size(dst_dtype),
                                    cudaMemcpyDeviceToDevice, stream));
      return;
    }
    dispatch_bits(dtype_size(dst_dtype), [&](auto tag) {
      using T = decltype(tag);
      copy_kernel<T, T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst),
                                                                static_cast<const T*>(src), l, n);
    });
  } else {
    dispatch_float(dst_dtype, [&](auto dst_tag) {
      dispatch_float(src_dtype, [&](auto src_tag) {
        using D = decltype(dst_tag);
        using S = decltype(src_tag);
        if constexpr (!std::is_same_v<D, S>) {  // same dtypes took the raw path above
          copy_kernel<D, S><<<blocks_for(n), kThreads, 0, stream>>>(
              static_cast<D*>(dst), static_cast<const S*>(src), l, n);
        }
      });
    });
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

void strided_fill(int device, const Shape& shape, void* dst, DType dtype, const int64_t* strides,
                  const void* value) {
  const int64_t n = numel(shape);
  if (n == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t stream = stream_of(device);
  const Layout l = collapse(shape, strides, strides);
  const size_t bytes = dtype_size(dtype);
  const bool zero = std::all_of(static_cast<const unsigned char*>(value),
                                static_cast<const unsigned char*>(value) + bytes,
                                [](unsigned char b) { return b == 0; });
  if (zero && (l.rank == 0 || (l.rank == 1 && l.dst_stride[0] == 1))) {
    LT_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(n) * bytes, stream));
    return;
  }
  dispatch_bits(bytes, [&](auto tag) {
    using T = decltype(tag);
    T bits;
    std::memcpy(&bits, value, sizeof(T));
    fill_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst), bits, l, n);
  });
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lt::cuda
