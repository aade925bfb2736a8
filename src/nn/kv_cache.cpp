#include "nn/kv_cache.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "nn/cuda/kv_cache.h"
#include "ops/rope.h"

namespace lt::nn {

namespace {

void check_cache(const Tensor& cache, const Tensor& fresh, const CacheStep& step) {
  LT_CHECK(cache.dim() == 4 && fresh.dim() == 4 && cache.size(0) == fresh.size(0) &&
               cache.size(2) == fresh.size(2) && cache.size(3) == fresh.size(3),
           "kv cache ", cache.str(), " cannot take new entries ", fresh.str());
  LT_CHECK(cache.dtype() == fresh.dtype() && cache.device() == fresh.device(), "kv cache ",
           cache.str(), " and new entries ", fresh.str(), " differ in dtype or device");
  LT_CHECK(static_cast<int64_t>(step.starts.size()) == cache.size(0), "kv cache of ", cache.size(0),
           " rows given ", step.starts.size(), " starts");
  for (int64_t start : step.starts) {
    LT_CHECK(start >= 0 && start + fresh.size(1) <= cache.size(1), "kv cache of ", cache.size(1),
             " positions cannot take ", fresh.size(1), " tokens at position ", start);
  }
}

// One (row, query token, head) per task: the scores over the row's cached
// positions, their softmax, and the weighted sum of values, in f32.
Tensor cached_attention_cpu(const Tensor& q_in, const KvLayer& cache, const CacheStep& step,
                            double scale) {
  LT_CHECK(q_in.dtype() == DType::F32 && cache.k.dtype() == DType::F32,
           "cached attention on the CPU computes in f32; got ", q_in.str());
  const Tensor q = q_in.contiguous();
  const int64_t b_count = q.size(0), t_count = q.size(1), hq = q.size(2), d = q.size(3);
  const int64_t capacity = cache.k.size(1), hkv = cache.k.size(2);
  const int64_t group = hq / hkv;
  Tensor out = Tensor::empty(q.shape(), DType::F32);
  const float* qp = q.data<float>();
  const float* kp = cache.k.data<float>();
  const float* vp = cache.v.data<float>();
  float* op = out.data<float>();
  const auto s = static_cast<float>(scale);
  parallel_for(0, b_count * t_count * hq, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> scores;
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t h = task % hq, bt = task / hq;
      const int64_t b = bt / t_count, t = bt % t_count;
      const int64_t keys = step.starts[b] + t + 1;
      const int64_t kv = h / group;
      const float* qr = qp + task * d;
      scores.resize(static_cast<size_t>(keys));
      float max_score = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        const float* kr = kp + ((b * capacity + j) * hkv + kv) * d;
        float dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += qr[i] * kr[i];
        scores[j] = dot * s;
        max_score = std::max(max_score, scores[j]);
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      float total = 0;
      for (int64_t j = 0; j < keys; ++j) {
        const float p = std::exp(scores[j] - max_score);
        total += p;
        const float* vr = vp + ((b * capacity + j) * hkv + kv) * d;
        for (int64_t i = 0; i < d; ++i) acc[i] += p * vr[i];
      }
      float* orow = op + task * d;
      for (int64_t i = 0; i < d; ++i) orow[i] = acc[i] / total;
    }
  });
  return out;
}

}  // namespace

CacheStep CacheStep::make(std::vector<int64_t> starts, int64_t tokens, Device device) {
  CacheStep step;
  const auto rows = static_cast<int64_t>(starts.size());
  std::vector<int64_t> positions(static_cast<size_t>(rows * tokens));
  for (int64_t b = 0; b < rows; ++b) {
    for (int64_t t = 0; t < tokens; ++t) positions[b * tokens + t] = starts[b] + t;
  }
  step.all_start_at_zero =
      std::all_of(starts.begin(), starts.end(), [](int64_t s) { return s == 0; });
  step.positions = Tensor::from_vector(positions, {rows, tokens}).to(device);
  step.starts_device = Tensor::from_vector(starts, {rows}).to(device);
  step.starts = std::move(starts);
  return step;
}

void write_cache(const Tensor& cache, const Tensor& fresh, const CacheStep& step) {
  check_cache(cache, fresh, step);
#ifdef LT_WITH_CUDA
  if (cache.device().is_cuda()) {
    cuda::write_cache(cache, fresh.contiguous(), step.starts_device);
    return;
  }
#endif
  const int64_t t = fresh.size(1);
  for (int64_t b = 0; b < cache.size(0); ++b) {
    const int64_t start = step.starts[b];
    cache.select(0, b).slice(0, start, start + t).copy_(fresh.select(0, b));
  }
}

Tensor cached_attention(const Tensor& q, const KvLayer& cache, const CacheStep& step,
                        double scale) {
  LT_CHECK(q.dim() == 4 && cache.k.dim() == 4 && q.size(0) == cache.k.size(0) &&
               q.size(3) == cache.k.size(3) && cache.k.size(2) > 0 &&
               q.size(2) % cache.k.size(2) == 0 && cache.v.shape() == cache.k.shape(),
           "cached attention: q ", q.str(), " does not fit the cache ", cache.k.str());
  LT_CHECK(cache.k.is_contiguous() && cache.v.is_contiguous(),
           "cached attention: the cache must be contiguous");
#ifdef LT_WITH_CUDA
  if (q.device().is_cuda())
    return cuda::cached_attention(q, cache.k, cache.v, step.starts_device, scale);
#endif
  return cached_attention_cpu(q, cache, step, scale);
}

Tensor forward_cached(const DecoderBlock& block, const Tensor& x, const RopeTable* rope,
                      const CacheStep& step, KvLayer& cache) {
  const Attention& attn = block.attention;
  const BlockOptions& o = attn.options;
  const int64_t b = x.size(0), t = x.size(1);
  const Tensor n1 = block.input_norm.forward(x);
  Tensor q = reshape(attn.q_proj.forward(n1), {b, t, o.num_heads, o.head_dim});
  Tensor k = reshape(attn.k_proj.forward(n1), {b, t, o.num_kv_heads, o.head_dim});
  Tensor v = reshape(attn.v_proj.forward(n1), {b, t, o.num_kv_heads, o.head_dim});
  if (o.qk_norm) {
    q = attn.q_norm.forward(q);
    k = attn.k_norm.forward(k);
  }
  if (o.use_rope) {
    LT_CHECK(rope != nullptr, "attention with RoPE needs a rope table");
    if (step.all_start_at_zero) {  // positions 0..T-1: exactly the training call
      q = rotary_embedding(q, *rope);
      k = rotary_embedding(k, *rope);
    } else {
      q = ops::rotary(q, rope->cos, rope->sin, step.positions);
      k = ops::rotary(k, rope->cos, rope->sin, step.positions);
    }
  }
  write_cache(cache.k, k, step);
  write_cache(cache.v, v, step);
  const double scale = 1.0 / std::sqrt(static_cast<double>(o.head_dim));
  const Tensor a = step.all_start_at_zero ? causal_attention(q, k, v, scale)
                                          : cached_attention(q, cache, step, scale);
  const Tensor h = add(x, attn.o_proj.forward(reshape(a, {b, t, o.num_heads * o.head_dim})));
  return add(h, block.mlp.forward(block.post_attention_norm.forward(h)));
}

}  // namespace lt::nn
