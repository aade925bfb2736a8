#pragma once
// The decoder block's inference path with a key/value cache: each new token
// computes its own q, k, v, appends k and v to the cache, and attends over
// every cached position of its row. Training never comes here: the block's
// forward() is unchanged, and this path runs under no-grad only.
//
// Rows of a batch hold different numbers of tokens. Row b's cache holds its
// positions 0 .. starts[b] - 1 before a step; the step's T new tokens take
// positions starts[b] .. starts[b] + T - 1 and are written there. A prompt
// batch is right-padded (every start 0): a real token never attends to the
// padding after it, and the padding's cache entries are overwritten by the
// row's later tokens before any real token can read them.
#include <span>
#include <vector>

#include "nn/block.h"

namespace lt::nn {

// One block's cached keys and values, [B, capacity, Hkv, D], in the
// model's dtype on its device.
struct KvLayer {
  Tensor k, v;
};

// Where a step's new tokens go, shared by every block of the step.
struct CacheStep {
  std::vector<int64_t> starts;  // per row: cached tokens before this step (host)
  Tensor positions;             // [B, T] i64 on the model's device: starts[b] + t
  Tensor starts_device;         // [B] i64 on the model's device (the GPU kernels read it)
  bool all_start_at_zero = false;
  // Built from the host starts for `tokens` new tokens per row.
  static CacheStep make(std::vector<int64_t> starts, int64_t tokens, Device device);
};

// cache[b, starts[b] + t] = fresh[b, t] for t < T. cache [B, C, H, D],
// fresh [B, T, H, D] of the same dtype and device.
void write_cache(const Tensor& cache, const Tensor& fresh, const CacheStep& step);

// Attention of q [B, T, Hq, D] over the cached keys and values (already
// holding this step's tokens): query t of row b reads positions
// 0 .. starts[b] + t. Grouped heads as causal_attention. f32 or bf16
// (computed in f32); result q's shape and dtype.
Tensor cached_attention(const Tensor& q, const KvLayer& cache, const CacheStep& step, double scale);

// DecoderBlock::forward for the step's new tokens x [B, T, hidden], writing
// their keys and values into `cache`. When every start is 0 the attention
// is the training kernel over the new tokens alone (the same arithmetic as
// forward()); otherwise cached_attention.
Tensor forward_cached(const DecoderBlock& block, const Tensor& x, const RopeTable* rope,
                      const CacheStep& step, KvLayer& cache);

}  // namespace lt::nn
