// Embedding lookup and its scatter-add backward on the GPU. Neither reads
// the ids on the host: a bad id (outside [0, V)) is recorded on the device
// (ops/cuda/index_check.cuh), its output row is zero and its gradient row
// is dropped.
#include <cub/device/device_radix_sort.cuh>

#include "ops/cuda/embedding.h"
#include "ops/cuda/index_check.cuh"
#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

namespace {

// Copies whole rows in words of type W (16, 8, 4, 2 or 1 bytes: the widest
// that the row length and both base addresses allow).
template <typename W, typename Id>
__global__ void gather_rows(const W* table, const Id* ids, W* out, int64_t row_words, int64_t vocab,
                            IndexError* bad) {
  const int64_t r = blockIdx.x;
  const int64_t id = ids[r];
  W* dst = out + r * row_words;
  if (id < 0 || id >= vocab) {  // the same for the whole block
    if (threadIdx.x == 0) record_bad_index(bad, kIndexOpEmbedding, id, r, vocab);
    for (int64_t j = threadIdx.x; j < row_words; j += blockDim.x) dst[j] = W{};
    return;
  }
  const W* src = table + id * row_words;
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
  const int64_t vocab = weight.size(0);
  IndexError* bad = index_error_record(weight.device());
  if (ids.dtype() == DType::I64) {
    gather_rows<W><<<rows, threads, 0, stream>>>(table, static_cast<const int64_t*>(ids.data_ptr()),
                                                 dst, words, vocab, bad);
  } else {
    gather_rows<W><<<rows, threads, 0, stream>>>(table, static_cast<const int32_t*>(ids.data_ptr()),
                                                 dst, words, vocab, bad);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

bool fits(const void* a, const void* b, int64_t row_bytes, size_t word) {
  return row_bytes % static_cast<int64_t>(word) == 0 &&
         reinterpret_cast<uintptr_t>(a) % word == 0 && reinterpret_cast<uintptr_t>(b) % word == 0;
}

// Records the first bad id (for `op`). With `key`, also writes the
// backward's sort keys: key[i] = ids[i], or `vocab` (sorted last, then
// skipped) for a bad id; position[i] = i.
template <typename Id>
__global__ void guard_ids(const Id* ids, int64_t n, int64_t vocab, IndexOp op, IndexError* bad,
                          uint32_t* key, int32_t* position) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const int64_t id = ids[i];
    const bool ok = id >= 0 && id < vocab;
    if (!ok) record_bad_index(bad, op, id, i, vocab);
    if (key) {
      key[i] = static_cast<uint32_t>(ok ? id : vocab);
      position[i] = static_cast<int32_t>(i);
    }
  }
}

void launch_guard_ids(const Tensor& ids_in, int64_t vocab, IndexOp op, cudaStream_t stream,
                      uint32_t* key = nullptr, int32_t* position = nullptr) {
  const Tensor ids = dense(ids_in);
  const int64_t n = ids.numel();
  IndexError* bad = index_error_record(ids.device());
  const unsigned blocks = grid_for(n, 256);
  if (ids.dtype() == DType::I64) {
    guard_ids<<<blocks, 256, 0, stream>>>(static_cast<const int64_t*>(ids.data_ptr()), n, vocab, op,
                                          bad, key, position);
  } else {
    guard_ids<<<blocks, 256, 0, stream>>>(static_cast<const int32_t*>(ids.data_ptr()), n, vocab, op,
                                          bad, key, position);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

// `key` sorted (stably: positions of one id stay in position order), with
// `order` the positions in that order. Block k leads when key[k] starts a
// run of equal keys: it owns vocab row key[k] and adds the gradient rows
// of the run (order[k], order[k + 1], ...) in f32. No two blocks write one
// row, so no atomics, and the order of additions is fixed (the CPU
// backend's: each row's tokens in position order). Other blocks return.
template <typename T, bool kPacked>
__global__ void scatter_rows(const T* grad, const uint32_t* key, const int32_t* order, int64_t n,
                             uint32_t vocab, int64_t cols, T* out) {
  const int64_t k = blockIdx.x;
  const uint32_t id = key[k];
  if (id >= vocab || (k > 0 && key[k - 1] == id)) return;  // the same for the whole block
  T* dst = out + static_cast<int64_t>(id) * cols;
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    constexpr int P = Pack<T>::kSize;
    for (int64_t p = threadIdx.x; p < cols / P; p += blockDim.x) {
      float acc[P] = {};
      for (int64_t j = k; j < n && key[j] == id; ++j) {
        const Pack<T> v = load_pack(grad + static_cast<int64_t>(order[j]) * cols + p * P);
#pragma unroll
        for (int q = 0; q < P; ++q) acc[q] += to_f32(v.v[q]);
      }
      Pack<T> o;
#pragma unroll
      for (int q = 0; q < P; ++q) o.v[q] = from_f32<T>(acc[q]);
      store_pack(dst + p * P, o);
    }
    scalar_from = cols / P * P;
  }
  for (int64_t c = scalar_from + threadIdx.x; c < cols; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = k; j < n && key[j] == id; ++j) {
      acc += to_f32(grad[static_cast<int64_t>(order[j]) * cols + c]);
    }
    dst[c] = from_f32<T>(acc);
  }
}

// Bits a radix sort needs for keys in [0, vocab] (vocab itself is the bad-id key).
int key_bits(int64_t vocab) {
  int bits = 1;
  while ((int64_t{1} << bits) <= vocab) ++bits;
  return bits;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids_in) {
  const int64_t channels = weight.size(1);
  Shape out_shape = ids_in.shape();
  out_shape.push_back(channels);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  const int64_t row_bytes = channels * static_cast<int64_t>(dtype_size(weight.dtype()));
  if (ids_in.numel() == 0) return out;
  ::lt::cuda::DeviceGuard guard(weight.device().index);
  cudaStream_t stream = stream_for(weight.device());
  if (out.numel() == 0) {  // rows of no width: nothing to copy, the ids are still checked
    launch_guard_ids(ids_in, weight.size(0), kIndexOpEmbedding, stream);
    return out;
  }
  LT_CHECK(ids_in.numel() <= 0x7fffffff, "embedding: ", ids_in.numel(), " ids exceed the grid");
  Tensor w = dense(weight), ids = dense(ids_in);
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

Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids_in, int64_t vocab_size) {
  check_kernel_dtype(grad_out, "embedding_backward");
  const int64_t channels = grad_out.size(-1);
  const Device device = grad_out.device();
  Tensor out = Tensor::empty({vocab_size, channels}, grad_out.dtype(), device);
  const int64_t n = ids_in.numel();
  if (n == 0 && out.numel() == 0) return out;
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(device);
  if (out.numel() == 0) {  // no rows or no width: nothing to add, the ids are still checked
    launch_guard_ids(ids_in, vocab_size, kIndexOpEmbeddingBackward, stream);
    return out;
  }
  // Rows no token names stay zero (+0.0 is all-zero bits in f32 and bf16).
  LT_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
  if (n == 0) return out;
  LT_CHECK(n <= 0x7fffffff, "embedding_backward: ", n, " ids exceed the grid");
  LT_CHECK(vocab_size < 0xffffffffLL, "embedding_backward: vocabulary ", vocab_size,
           " exceeds 32-bit sort keys");

  // Group the token positions by id on the device: a stable radix sort of
  // (id, position) pairs puts each id's tokens together in position order.
  Tensor keys = Tensor::empty({2, n}, DType::I32, device);       // [unsorted | sorted] ids
  Tensor positions = Tensor::empty({2, n}, DType::I32, device);  // [0..n) | order
  auto* key_in = static_cast<uint32_t*>(keys.data_ptr());
  uint32_t* key_sorted = key_in + n;
  auto* pos_in = static_cast<int32_t*>(positions.data_ptr());
  int32_t* order = pos_in + n;
  launch_guard_ids(ids_in, vocab_size, kIndexOpEmbeddingBackward, stream, key_in, pos_in);
  const int items = static_cast<int>(n), end_bit = key_bits(vocab_size);
  size_t temp_bytes = 0;
  LT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, key_in, key_sorted, pos_in,
                                                order, items, 0, end_bit, stream));
  Tensor temp =
      Tensor::empty({static_cast<int64_t>(std::max<size_t>(temp_bytes, 1))}, DType::U8, device);
  LT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), temp_bytes, key_in, key_sorted,
                                                pos_in, order, items, 0, end_bit, stream));

  Tensor g = dense(grad_out);
  dispatch_kernel_dtype(g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto* pg = static_cast<const T*>(g.data_ptr());
    auto* po = static_cast<T*>(out.data_ptr());
    const int threads = row_threads(channels, Pack<T>::kSize);
    const auto blocks = static_cast<unsigned>(n);
    const auto vocab = static_cast<uint32_t>(vocab_size);
    if (channels % Pack<T>::kSize == 0 && aligned16(pg) && aligned16(po)) {
      scatter_rows<T, true>
          <<<blocks, threads, 0, stream>>>(pg, key_sorted, order, n, vocab, channels, po);
    } else {
      scatter_rows<T, false>
          <<<blocks, threads, 0, stream>>>(pg, key_sorted, order, n, vocab, channels, po);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  });
  return out;
}

}  // namespace lt::ops::cuda
