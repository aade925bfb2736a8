#pragma once
// The model's inference path with a key/value cache (nn/kv_cache.h): a
// prompt batch runs once, then each decoding step runs one new token per
// row. Training paths never come here; the prompt step does the same
// arithmetic as CausalLM::logits (the same kernels, in the same order), so
// its logits equal a no-cache forward's bit for bit.
#include <memory>
#include <span>
#include <vector>

#include "models/causal_lm.h"
#include "nn/kv_cache.h"

namespace lt::models {

// Keys and values of every block for `batch` rows of up to `capacity`
// positions, in the model's dtype on its device:
// 2 x layers x batch x capacity x kv_heads x head_dim elements.
class KvCache {
 public:
  KvCache(const CausalLM& model, int64_t batch, int64_t capacity);
  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  std::vector<nn::KvLayer>& layers() { return layers_; }
  // What a cache of this shape takes, for a check before allocating.
  static int64_t bytes_for(const ModelConfig& config, DType dtype, int64_t batch, int64_t capacity);

 private:
  int64_t batch_, capacity_;
  std::vector<nn::KvLayer> layers_;
};

// Where each stage's weights are while forward_cached runs it, for a model
// whose parameters do not all live on its device (exec/streamed_weights.h
// keeps blocks in host memory and copies each in as it comes). hold() is
// called for each stage in chain order, and the stage runs while the
// returned object lives (null: nothing to hold).
class StageWeightSource {
 public:
  class Held {
   public:
    virtual ~Held() = default;
  };
  virtual ~StageWeightSource() = default;
  virtual std::unique_ptr<Held> hold(size_t stage) = 0;
};

// Runs `ids` [B, T] (integer, on the model's device) through the model:
// row b's tokens take positions starts[b] .. starts[b] + T - 1, their keys
// and values go into `cache`, and the result is the logits [B, V] (model
// dtype and device) of each row's token at index last[b] < T. Call under
// no-grad. Every start must leave room: starts[b] + T <= capacity, and
// within the model's max_position_embeddings. `weights` (null: the model's
// parameters are on its device) places each stage's weights as it runs.
Tensor forward_cached(const CausalLM& model, const Tensor& ids, std::span<const int64_t> starts,
                      std::span<const int64_t> last, KvCache& cache,
                      StageWeightSource* weights = nullptr);

}  // namespace lt::models
