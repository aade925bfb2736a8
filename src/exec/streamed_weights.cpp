#include "exec/streamed_weights.h"

#include <algorithm>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "exec/weight_binding.h"

namespace lt::exec {

namespace {

// Where each weight starts in a stage's slab or slot: 256 bytes, what the
// GPU's vector loads and cuBLAS want of a matrix's start.
constexpr int64_t kAlignBytes = 256;

// Per stage: the parameters it owns, then (a tied head) the embedding's.
struct StageWeights {
  std::vector<Tensor> own;
  std::vector<Tensor> reads;
};

std::vector<StageWeights> weights_of(const models::CausalLM& model) {
  std::vector<StageWeights> out;
  for (const auto& stage : model.stages()) {
    nn::NamedParameters own;
    stage->collect(own);
    StageWeights w;
    for (const auto& [name, p] : own) w.own.push_back(p);
    w.reads = w.own;
    const auto* head = dynamic_cast<const models::HeadStage*>(stage.get());
    if (head && head->tied()) {
      const auto& embed = dynamic_cast<const models::EmbedStage&>(*model.stages().front());
      w.reads.push_back(embed.tokens().weight);
    }
    out.push_back(std::move(w));
  }
  return out;
}

// Element offsets of `weights` packed in one buffer of `dtype`, each
// aligned; the last entry is the buffer's length.
std::vector<int64_t> pack(const std::vector<Tensor>& weights, DType dtype) {
  const int64_t align = kAlignBytes / static_cast<int64_t>(dtype_size(dtype));
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const Tensor& w : weights) {
    offsets.push_back(at);
    at += (w.numel() + align - 1) / align * align;
  }
  offsets.push_back(at);
  return offsets;
}

Tensor view_into(const Tensor& buffer, int64_t offset, const Shape& shape) {
  return Tensor::from_storage(buffer.storage(), buffer.offset() + offset, shape,
                              contiguous_strides(shape), buffer.dtype());
}

// Moves `weights` into one new buffer of `memory` (their values converted
// to `dtype`) and points each at its place; the old memory goes with the
// last handle to it.
Tensor place(const std::vector<Tensor>& weights, DType dtype, Allocator& memory) {
  const std::vector<int64_t> offsets = pack(weights, dtype);
  Tensor buffer = Tensor::empty({offsets.back()}, dtype, memory);
  for (size_t i = 0; i < weights.size(); ++i) {
    Tensor view = view_into(buffer, offsets[i], weights[i].shape());
    // Converted on the host first: only the compute dtype's bytes cross.
    view.copy_(weights[i].detach().to(Device::cpu(), dtype).contiguous());
    point_at(weights[i], view);
  }
  return buffer;
}

class HeldBinding final : public models::StageWeightSource::Held {
 public:
  HeldBinding(const std::vector<Tensor>& params, const std::vector<Tensor>& copies)
      : binding_(params, copies) {}

 private:
  WeightBinding binding_;
};

}  // namespace

std::vector<StageBytes> stage_bytes(const models::CausalLM& model, DType dtype) {
  std::vector<StageBytes> out;
  const auto size = static_cast<int64_t>(dtype_size(dtype));
  for (const StageWeights& w : weights_of(model))
    out.push_back({pack(w.own, dtype).back() * size, pack(w.reads, dtype).back() * size});
  return out;
}

StreamedWeights::StreamedWeights(models::CausalLM& model, StreamingDevice& device,
                                 StreamLayout layout)
    : device_(device), layout_(std::move(layout)), dtype_(device.compute_dtype()) {
  const std::vector<StageWeights> weights = weights_of(model);
  const auto stages = static_cast<int>(weights.size());
  LT_CHECK(static_cast<int>(layout_.streamed.size()) == stages, "streamed generation: the layout ",
           "names ", layout_.streamed.size(), " stages, the model has ", stages);
  LT_CHECK(layout_.slots >= 1, "streamed generation: needs at least one slot, got ", layout_.slots);
  for (const auto& [name, p] : model.parameters()) {
    LT_CHECK(p.device().is_cpu(), "streamed generation: parameter '", name,
             "' must be on the host to be placed, got ", p.str());
  }
  NoGradGuard no_grad;
  const auto scope = device_.compute_scope();
  std::unordered_map<const TensorImpl*, Tensor> host_memory;  // streamed parameter -> its slab view
  for (int s = 0; s < stages; ++s) {
    const std::vector<Tensor>& own = weights[s].own;
    if (own.empty()) continue;
    if (layout_.streamed[s]) {
      host_slabs_.push_back(place(own, dtype_, device_.host_memory()));
      for (const Tensor& p : own)
        host_memory[p.impl()] = view_into(p, 0, p.shape());  // a handle of its own
    } else {
      device_slabs_.push_back(place(own, dtype_, device_.memory()));
      resident_bytes_ += device_slabs_.back().nbytes();
    }
  }
  copies_.resize(weights.size());
  position_.assign(weights.size(), -1);
  for (int s = 0; s < stages; ++s) {
    StageCopy& c = copies_[s];
    c.name = model.stages()[s]->name();
    for (const Tensor& w : weights[s].reads) {
      const auto it = host_memory.find(w.impl());
      if (it == host_memory.end()) continue;  // on the device for good
      c.params.push_back(w);
      c.sources.push_back(it->second);
    }
    if (c.params.empty()) continue;
    c.offsets = pack(c.params, dtype_);
    c.elements = c.offsets.back();
    const int64_t bytes = c.elements * static_cast<int64_t>(dtype_size(dtype_));
    streamed_bytes_ += bytes;
    slot_bytes_ = std::max(slot_bytes_, bytes);
    position_[s] = static_cast<int>(order_.size());
    order_.push_back(s);
  }
  slots_.resize(std::min<size_t>(static_cast<size_t>(layout_.slots), order_.size()));
  model.set_compute_device(device_.memory().device());
}

StreamedWeights::~StreamedWeights() {
  // The copies fetched ahead for a forward that never came: they hold
  // their own references to what they move, but finish before the slots'
  // memory goes back to the device.
  for (const Slot& s : slots_)
    if (s.ready.valid()) s.ready.wait();
}

int StreamedWeights::find_slot(int stage) const {
  for (size_t k = 0; k < slots_.size(); ++k)
    if (slots_[k].stage == stage) return static_cast<int>(k);
  return -1;
}

void StreamedWeights::load(int slot, int stage) {
  const StageCopy& c = copies_[stage];
  Slot& s = slots_[slot];
  // The previous stage's memory first, so that the device holds at most
  // `slots` stages (a queued copy keeps its own reference).
  s.views.clear();
  s.buffer = Tensor();
  s.stage = stage;
  s.buffer = device_.empty({c.elements}, dtype_);
  CopyList list;
  for (size_t k = 0; k < c.params.size(); ++k) {
    s.views.push_back(view_into(s.buffer, c.offsets[k], c.params[k].shape()));
    list.emplace_back(s.views.back(), c.sources[k]);
  }
  s.ready = device_.upload(std::move(list), Ticket(), "weights " + c.name);
  ++loads_;
}

std::unique_ptr<models::StageWeightSource::Held> StreamedWeights::hold(size_t stage) {
  LT_CHECK(stage < copies_.size(), "streamed generation: stage ", stage, " of ", copies_.size());
  if (copies_[stage].params.empty()) return nullptr;
  // This stage and the next slots - 1 streamed ones (cyclically) must be in
  // a slot or on their way; the others' slots take the missing ones.
  const size_t n = order_.size(), window = slots_.size();
  std::vector<int> wanted;
  for (size_t j = 0; j < window; ++j)
    wanted.push_back(order_[(static_cast<size_t>(position_[stage]) + j) % n]);
  for (int want : wanted) {
    if (find_slot(want) >= 0) continue;
    for (size_t k = 0; k < slots_.size(); ++k) {
      if (std::find(wanted.begin(), wanted.end(), slots_[k].stage) == wanted.end()) {
        load(static_cast<int>(k), want);
        break;
      }
    }
  }
  Slot& s = slots_[find_slot(static_cast<int>(stage))];
  upload_wait_s_ += wait_seconds(s.ready);
  return std::make_unique<HeldBinding>(copies_[stage].params, s.views);
}

}  // namespace lt::exec
