#pragma once
// Note [Streamed generation]
// Generation (train/generation.h) of a model whose weights do not fit the
// device, the way the streaming executor trains one (exec/streaming.h):
//  - the stages chosen to stream keep their weights in host memory, one
//    slab per stage in the device's compute dtype (pinned bf16 on a GPU, so
//    that copies run at the link's full rate);
//  - each time a forward reaches such a stage, its weights are in one of
//    `slots` device buffers, copied there on the device's upload engine
//    (StreamingDevice::upload) and bound to the model's own parameter
//    tensors while the stage runs (exec/weight_binding.h);
//  - while a stage computes, the next slots - 1 streamed stages are being
//    copied in. The order is the chain's, taken cyclically: the last
//    streamed block starts the copy of the first one for the next forward,
//    which then overlaps the head, the token's choice and the stages kept
//    on the device;
//  - the other stages are copied to the device once, for good. The KV cache
//    and the activations live on the device (allocated in compute_scope()).
// A copy into a slot never overwrites weights a queued kernel still reads:
// the device orders an upload after the compute queued before the call
// (exec/streaming_device.h), and a slot's previous stage had been queued.
//
// So a decode step moves every streamed byte once, and on a GPU it takes
// at least streamed_bytes() / the host-to-device bandwidth, whatever the
// batch: a prompt batch moves them once too, behind far more compute.
#include <memory>
#include <string>
#include <vector>

#include "exec/streaming_device.h"
#include "models/causal_lm.h"
#include "models/decode.h"

namespace lt::exec {

// A stage's weight bytes in one dtype, as placed (each weight aligned).
struct StageBytes {
  int64_t own = 0;    // the parameters the stage owns
  int64_t reads = 0;  // every weight it reads: a tied head also reads the embedding
};
std::vector<StageBytes> stage_bytes(const models::CausalLM& model, DType dtype);

struct StreamLayout {
  // Per stage of model.stages() (embed, blocks, head): true keeps its
  // weights in host memory and copies them in each time it runs.
  std::vector<bool> streamed;
  int slots = 2;  // device buffers the streamed stages take turns in
};

class StreamedWeights final : public models::StageWeightSource {
 public:
  // Places `model`'s parameters (on the host) as `layout` says, in the
  // device's compute dtype, and makes the device the model's compute
  // device; the model stays so. The device outlives this object and the
  // model: the parameters and what the model caches (its rope table) live
  // in the device's memory, device or host.
  StreamedWeights(models::CausalLM& model, StreamingDevice& device, StreamLayout layout);
  // Waits for the copies still queued.
  ~StreamedWeights() override;
  StreamedWeights(const StreamedWeights&) = delete;
  StreamedWeights& operator=(const StreamedWeights&) = delete;

  std::unique_ptr<Held> hold(size_t stage) override;
  // While it lives, tensors the calling thread makes without naming an
  // allocator are device tensors, on the device's compute stream: hold one
  // around generation, so that the cache and activations are the device's
  // and its kernels order with the copies.
  std::unique_ptr<StreamingDevice::Scope> compute_scope() { return device_.compute_scope(); }

  int64_t streamed_bytes() const { return streamed_bytes_; }  // copied per forward
  int64_t resident_bytes() const { return resident_bytes_; }  // on the device for good
  int64_t slot_bytes() const { return slot_bytes_; }          // the largest streamed stage
  const StreamLayout& layout() const { return layout_; }
  // Since construction: stage copies issued, and the seconds hold() waited
  // for them (the copies compute did not hide).
  int64_t loads() const { return loads_; }
  double upload_wait_s() const { return upload_wait_s_; }

 private:
  struct StageCopy {
    std::string name;
    std::vector<Tensor> params;   // the model's tensors it binds
    std::vector<Tensor> sources;  // their host memory, through handles no binding moves
    std::vector<int64_t> offsets;
    int64_t elements = 0;  // the slot it needs
  };
  struct Slot {
    int stage = -1;
    Tensor buffer;
    std::vector<Tensor> views;  // per weight of the stage, into buffer
    Ticket ready;
  };
  int find_slot(int stage) const;
  void load(int slot, int stage);

  StreamingDevice& device_;
  const StreamLayout layout_;
  const DType dtype_;
  std::vector<StageCopy> copies_;  // per stage; empty params: nothing to copy
  std::vector<int> order_;         // the streamed stages, in chain order
  std::vector<int> position_;      // per stage: its index in order_ (-1: not streamed)
  std::vector<Tensor> host_slabs_, device_slabs_;
  std::vector<Slot> slots_;
  int64_t streamed_bytes_ = 0, resident_bytes_ = 0, slot_bytes_ = 0;
  int64_t loads_ = 0;
  double upload_wait_s_ = 0;
};

}  // namespace lt::exec
