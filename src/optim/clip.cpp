#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "core/thread_pool.h"
#include "optim/cuda/grad_norm.h"

namespace lt::optim {

namespace {

// Elements per partial sum; the chunking fixes the order of additions, so
// it is part of the result's definition (at the last bit), not only a
// tuning constant.
constexpr int64_t kChunkElements = int64_t{1} << 16;
// Independent accumulators per chunk: breaks the add latency chain and lets
// the compiler keep them in vector registers.
constexpr int64_t kAccumulators = 8;

inline double widen(float g) {
  return g;
}
inline double widen(BFloat16 g) {
  return bf16_to_f32(g.bits);
}

template <typename Grad>
double squared_sum(const Grad* g, int64_t n) {
  double acc[kAccumulators] = {};
  int64_t i = 0;
  for (; i + kAccumulators <= n; i += kAccumulators) {
    for (int64_t j = 0; j < kAccumulators; ++j) {
      const double x = widen(g[i + j]);
      acc[j] += x * x;
    }
  }
  for (; i < n; ++i) {
    const double x = widen(g[i]);
    acc[0] += x * x;
  }
  double total = 0;
  for (double a : acc) total += a;
  return total;
}

}  // namespace

double grad_squared_sum(const nn::NamedParameters& params) {
  struct Chunk {
    const void* data;  // first element of the chunk
    bool bf16;
    int64_t n;
  };
  std::vector<Tensor> grads;  // keeps contiguous copies alive
  std::vector<Chunk> chunks;
  // CUDA gradients, grouped by device in order of first appearance: each
  // device's sum is one reduction there (and one wait), not one per tensor.
  std::vector<std::vector<Tensor>> cuda_grads;
  for (const auto& [name, p] : params) {
    const Tensor& grad = p.grad();
    if (!grad.defined()) continue;
#ifdef LT_WITH_CUDA
    const bool readable = grad.device().is_cpu() || grad.device().is_cuda();
#else
    const bool readable = grad.device().is_cpu();
#endif
    LT_CHECK(readable, "grad norm: gradient of '", name,
             "' is on a device this build cannot read: ", grad.str());
    LT_CHECK(grad.dtype() == DType::F32 || grad.dtype() == DType::BF16, "grad norm: gradient of '",
             name, "' must be f32 or bf16, got ", grad.str());
    if (grad.device().is_cuda()) {
      auto group = std::find_if(cuda_grads.begin(), cuda_grads.end(), [&](const auto& gs) {
        return gs.front().device() == grad.device();
      });
      if (group == cuda_grads.end()) {
        cuda_grads.emplace_back();
        group = std::prev(cuda_grads.end());
      }
      group->push_back(grad.contiguous());
      continue;
    }
    Tensor g = grad.contiguous();
    grads.push_back(g);
    const bool bf16 = g.dtype() == DType::BF16;
    const auto* base = static_cast<const char*>(g.data_ptr());
    for (int64_t b = 0; b < g.numel(); b += kChunkElements) {
      chunks.push_back({base + b * static_cast<int64_t>(dtype_size(g.dtype())), bf16,
                        std::min(kChunkElements, g.numel() - b)});
    }
  }
  std::vector<double> partial(chunks.size());
  parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const Chunk& chunk = chunks[static_cast<size_t>(c)];
      partial[static_cast<size_t>(c)] =
          chunk.bf16 ? squared_sum(static_cast<const BFloat16*>(chunk.data), chunk.n)
                     : squared_sum(static_cast<const float*>(chunk.data), chunk.n);
    }
  });
  double total = 0;
  for (double s : partial) total += s;
  for (const auto& group : cuda_grads) {
#ifdef LT_WITH_CUDA
    total += cuda::squared_sum(group);
#else
    (void)group;
#endif
  }
  return total;
}

int64_t grad_norm_chunk_count(int64_t numel) {
  return (numel + kChunkElements - 1) / kChunkElements;
}

void grad_chunk_squares(const Tensor& grad, double* out) {
  LT_CHECK(grad.device().is_cpu(), "grad norm: expected a CPU gradient, got ", grad.str());
  LT_CHECK(grad.dtype() == DType::F32 || grad.dtype() == DType::BF16,
           "grad norm: gradient must be f32 or bf16, got ", grad.str());
  const Tensor g = grad.contiguous();
  const bool bf16 = g.dtype() == DType::BF16;
  const int64_t n = g.numel();
  const void* base = g.data_ptr();
  parallel_for(0, grad_norm_chunk_count(n), 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const int64_t begin = c * kChunkElements;
      const int64_t count = std::min(kChunkElements, n - begin);
      out[c] = bf16 ? squared_sum(static_cast<const BFloat16*>(base) + begin, count)
                    : squared_sum(static_cast<const float*>(base) + begin, count);
    }
  });
}

double global_grad_norm(const nn::NamedParameters& params) {
  return std::sqrt(grad_squared_sum(params));
}

double clip_scale(double total_norm, double max_norm) {
  LT_CHECK(!std::isnan(max_norm), "clip_scale: max_norm (train.grad_clip) is NaN");
  if (max_norm <= 0) return 1.0;
  const double coef = max_norm / (total_norm + 1e-6);
  // Written so that a NaN coefficient stays NaN, as torch.clamp(max=1) does.
  return coef > 1.0 ? 1.0 : coef;
}

}  // namespace lt::optim
