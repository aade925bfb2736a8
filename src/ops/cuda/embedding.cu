// Embedding lookup and its scatter-add backward on the GPU.
#include <algorithm>
#include <numeric>

#include "ops/cuda/embedding.h"
#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

namespace {

// Copies whole rows in words of type W (16, 8, 4, 2 or 1 bytes: the widest
// that the row length and both base addresses allow).
template <typename W, typename Id>
__global__ void gather_rows(const W* table, const Id* ids, W* out, int64_t row_words) {
  const int64_t r = blockIdx.x;
  const W* src = table + static_cast<int64_t>(ids[r]) * row_words;
  W* dst = out + r * row_words;
  for (int64_t j = threadIdx.x; j < row_words; j += blockDim.x) dst[j] = src[j];
}

template <typename W>
void launch_gather(const Tensor& weight, const Tensor& ids, const Tensor& out, int64_t row_bytes,
                   cudaStream_t stream) {
  const int64_t words = row_bytes / static_cast<int64_t>(sizeof(W));
  const int threads = row_threads(words, 1);
  const auto rows = static_cast<unsigned>(ids.numel());
  const auto* table = static_cast<const W*>(weight.data_ptr());
  auto* dst = static_cast<W*>(out.data_ptr());
  if (ids.dtype() == DType::I64) {
    gather_rows<W><<<rows, threads, 0, stream>>>(table, static_cast<const int64_t*>(ids.data_ptr()),
                                                 dst, words);
  } else {
    gather_rows<W><<<rows, threads, 0, stream>>>(table, static_cast<const int32_t*>(ids.data_ptr()),
                                                 dst, words);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

bool fits(const void* a, const void* b, int64_t row_bytes, size_t word) {
  return row_bytes % static_cast<int64_t>(word) == 0 &&
         reinterpret_cast<uintptr_t>(a) % word == 0 && reinterpret_cast<uintptr_t>(b) % word == 0;
}

// Block u owns vocab row uniq[u]: it adds the gradient rows of its tokens
// (order[seg[u]] .. order[seg[u + 1] - 1], in position order) in f32.
// No two blocks write one row, so no atomics, and the order is fixed.
template <typename T, bool kPacked>
__global__ void scatter_rows(const T* grad, const int64_t* uniq, const int64_t* seg,
                             const int64_t* order, int64_t cols, T* out) {
  const int64_t u = blockIdx.x;
  const int64_t begin = seg[u], end = seg[u + 1];
  T* dst = out + uniq[u] * cols;
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    constexpr int P = Pack<T>::kSize;
    for (int64_t p = threadIdx.x; p < cols / P; p += blockDim.x) {
      float acc[P] = {};
      for (int64_t k = begin; k < end; ++k) {
        const Pack<T> v = load_pack(grad + order[k] * cols + p * P);
#pragma unroll
        for (int j = 0; j < P; ++j) acc[j] += to_f32(v.v[j]);
      }
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < P; ++j) o.v[j] = from_f32<T>(acc[j]);
      store_pack(dst + p * P, o);
    }
    scalar_from = cols / P * P;
  }
  for (int64_t c = scalar_from + threadIdx.x; c < cols; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t k = begin; k < end; ++k) acc += to_f32(grad[order[k] * cols + c]);
    dst[c] = from_f32<T>(acc);
  }
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids_in) {
  const int64_t channels = weight.size(1);
  Shape out_shape = ids_in.shape();
  out_shape.push_back(channels);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  const int64_t row_bytes = channels * static_cast<int64_t>(dtype_size(weight.dtype()));
  if (out.numel() == 0) return out;
  LT_CHECK(ids_in.numel() <= 0x7fffffff, "embedding: ", ids_in.numel(), " ids exceed the grid");
  Tensor w = dense(weight), ids = dense(ids_in);
  ::lt::cuda::DeviceGuard guard(weight.device().index);
  cudaStream_t stream = stream_for(weight.device());
  const void* src = w.data_ptr();
  const void* dst = out.data_ptr();
  if (fits(src, dst, row_bytes, 16)) {
    launch_gather<uint4>(w, ids, out, row_bytes, stream);
  } else if (fits(src, dst, row_bytes, 8)) {
    launch_gather<uint2>(w, ids, out, row_bytes, stream);
  } else if (fits(src, dst, row_bytes, 4)) {
    launch_gather<uint32_t>(w, ids, out, row_bytes, stream);
  } else if (fits(src, dst, row_bytes, 2)) {
    launch_gather<uint16_t>(w, ids, out, row_bytes, stream);
  } else {
    launch_gather<uint8_t>(w, ids, out, row_bytes, stream);
  }
  return out;
}

Tensor embedding_backward(const Tensor& grad_out, const std::vector<int64_t>& rows,
                          int64_t vocab_size) {
  check_kernel_dtype(grad_out, "embedding_backward");
  const int64_t channels = grad_out.size(-1);
  const Device device = grad_out.device();
  Tensor out = Tensor::empty({vocab_size, channels}, grad_out.dtype(), device);
  if (out.numel() == 0) return out;
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(device);
  // Rows no token names stay zero (+0.0 is all-zero bits in f32 and bf16).
  LT_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
  const auto n = static_cast<int64_t>(rows.size());
  if (n == 0) return out;

  // Group the token positions by id on the host (the ids are there already,
  // having been checked): a stable sort keeps each id's tokens in position
  // order. One upload carries [uniq (U) | seg (U + 1) | order (n)].
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return rows[a] < rows[b]; });
  std::vector<int64_t> uniq, seg;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t id = rows[order[k]];
    if (uniq.empty() || uniq.back() != id) {
      uniq.push_back(id);
      seg.push_back(k);
    }
  }
  seg.push_back(n);
  const auto groups = static_cast<int64_t>(uniq.size());
  std::vector<int64_t> plan;
  plan.reserve(static_cast<size_t>(groups + groups + 1 + n));
  plan.insert(plan.end(), uniq.begin(), uniq.end());
  plan.insert(plan.end(), seg.begin(), seg.end());
  plan.insert(plan.end(), order.begin(), order.end());
  Tensor plan_dev = Tensor::from_vector(plan, {static_cast<int64_t>(plan.size())}).to(device);
  const auto* p = static_cast<const int64_t*>(plan_dev.data_ptr());

  Tensor g = dense(grad_out);
  dispatch_kernel_dtype(g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto* pg = static_cast<const T*>(g.data_ptr());
    auto* po = static_cast<T*>(out.data_ptr());
    const int threads = row_threads(channels, Pack<T>::kSize);
    const auto blocks = static_cast<unsigned>(groups);
    if (channels % Pack<T>::kSize == 0 && aligned16(pg) && aligned16(po)) {
      scatter_rows<T, true>
          <<<blocks, threads, 0, stream>>>(pg, p, p + groups, p + 2 * groups + 1, channels, po);
    } else {
      scatter_rows<T, false>
          <<<blocks, threads, 0, stream>>>(pg, p, p + groups, p + 2 * groups + 1, channels, po);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  });
  return out;
}

}  // namespace lt::ops::cuda
