#include "ops/embedding.h"

#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cuda/embedding.h"
#include "ops/index_checks.h"

namespace lt::ops {

namespace {

// The ids as i64, each checked against the vocabulary. Checked up front, on
// the calling thread, so that a bad id fails before any output is written.
void check_id_dtype(const Tensor& ids, const char* op) {
  LT_CHECK(ids.dtype() == DType::I32 || ids.dtype() == DType::I64, op,
           ": ids must be i32 or i64, got ", ids.str());
}

std::vector<int64_t> checked_ids(const Tensor& ids, int64_t vocab_size, const char* op) {
  check_id_dtype(ids, op);
  Tensor c = ids.contiguous();
  const int64_t n = c.numel();
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (c.dtype() == DType::I64) {
    const int64_t* p = c.data<int64_t>();
    std::copy(p, p + n, out.begin());
  } else {
    const int32_t* p = c.data<int32_t>();
    std::copy(p, p + n, out.begin());
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = out[static_cast<size_t>(i)];
    LT_CHECK(id >= 0 && id < vocab_size, op, ": id ", id, " (flat position ", i, " of ids ",
             shape_str(ids.shape()), ") is outside the vocabulary [0, ", vocab_size, ")");
  }
  return out;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  Device device = common_device({&weight, &ids}, "embedding");
  LT_CHECK(weight.dim() == 2, "embedding: weight must be [V, C], got ", weight.str());
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) {
    // The kernel guards every id and records a bad one on the device; the
    // check waits for it unless the caller deferred it (ops/index_checks.h).
    check_id_dtype(ids, "embedding");
    Tensor out = cuda::embedding(weight, ids);
    if (!index_checks_deferred()) check_index_errors(device);
    return out;
  }
#endif
  if (!device.is_cpu()) no_kernel("embedding", device);
  const int64_t vocab = weight.size(0), channels = weight.size(1);
  const std::vector<int64_t> rows = checked_ids(ids, vocab, "embedding");
  Shape out_shape = ids.shape();
  out_shape.push_back(channels);
  Tensor w = weight.contiguous();
  Tensor out = Tensor::empty(out_shape, weight.dtype());
  const size_t row_bytes = static_cast<size_t>(channels) * dtype_size(weight.dtype());
  const auto* src = static_cast<const char*>(w.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  // A row copy is a memcpy; chunks of ~64 KiB keep the scheduling cost small.
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(row_bytes, 1));
  parallel_for(0, static_cast<int64_t>(rows.size()), grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      std::memcpy(dst + static_cast<size_t>(i) * row_bytes,
                  src + static_cast<size_t>(rows[static_cast<size_t>(i)]) * row_bytes, row_bytes);
    }
  });
  return out;
}

Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids, int64_t vocab_size) {
  Device device = common_device({&grad_out, &ids}, "embedding_backward");
  check_floating(grad_out, "embedding_backward");
  LT_CHECK(vocab_size >= 0, "embedding_backward: negative vocabulary size ", vocab_size);
  Shape expected = ids.shape();
  LT_CHECK(grad_out.dim() == ids.dim() + 1, "embedding_backward: gradient ", grad_out.str(),
           " does not match ids ", shape_str(ids.shape()), " + [C]");
  const int64_t channels = grad_out.size(-1);
  expected.push_back(channels);
  LT_CHECK(grad_out.shape() == expected, "embedding_backward: gradient ", grad_out.str(),
           " does not match ids ", shape_str(ids.shape()), " + [C]");
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) {
    check_id_dtype(ids, "embedding_backward");
    Tensor grad = cuda::embedding_backward(grad_out, ids, vocab_size);
    if (!index_checks_deferred()) check_index_errors(device);
    return grad;
  }
#endif
  if (!device.is_cpu()) no_kernel("embedding_backward", device);
  const std::vector<int64_t> rows = checked_ids(ids, vocab_size, "embedding_backward");
  const int64_t n = static_cast<int64_t>(rows.size());

  // Group token positions by id (a stable counting sort): then each vocab
  // row is owned by one thread, which adds its tokens in position order.
  // No atomics, and the sum order is fixed.
  std::vector<int64_t> start(static_cast<size_t>(vocab_size) + 1, 0);
  for (int64_t id : rows) ++start[static_cast<size_t>(id) + 1];
  for (int64_t v = 0; v < vocab_size; ++v) start[v + 1] += start[v];
  std::vector<int64_t> order(static_cast<size_t>(n));
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[fill[rows[i]]++] = i;
  }

  Tensor g = as_compute(grad_out);
  Tensor acc = Tensor::zeros({vocab_size, channels}, g.dtype());
  dispatch_floating(g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.data<T>();
    T* ap = acc.data<T>();
    const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(channels, 1));
    parallel_for(0, vocab_size, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t v = lo; v < hi; ++v) {
        T* dst = ap + v * channels;
        for (int64_t k = start[v]; k < start[v + 1]; ++k) {
          const T* src = gp + order[k] * channels;
          for (int64_t c = 0; c < channels; ++c) dst[c] += src[c];
        }
      }
    });
  });
  return acc.to(grad_out.dtype());
}

}  // namespace lt::ops
