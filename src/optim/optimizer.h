#pragma once
// What an executor needs from an optimizer: one update per step and its
// checkpoint state. AdamW (fp32 states) and AdamW8bit (blockwise 8-bit
// states) implement it, so the trainer picks one by optim.name.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace lt::compile {
class KernelCache;
}

namespace lt::optim {

// Named tensors, in a fixed order (a checkpoint file's layout).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A state tensor of `shape` and `dtype` without memory (its storage null):
// what an optimizer makes for a parameter whose states start on disk.
Tensor tensor_without_memory(const Shape& shape, DType dtype);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Number of parameters (the constructor's list).
  virtual size_t size() const = 0;
  // Updates the parameters [first, last) of the constructor's list that
  // have a gradient. `lr`: this step's rate; `grad_scale`: the clip factor
  // folded in (both finite). Executors that update stage by stage (the
  // streaming executor) call it once per stage's range, then finish_step().
  virtual void update(double lr, double grad_scale, size_t first, size_t last) = 0;
  // Ends one optimizer step: counts it (the "step" checkpoints save).
  virtual void finish_step() = 0;
  // One whole step over every parameter.
  void step(double lr, double grad_scale = 1.0) {
    update(lr, grad_scale, 0, size());
    finish_step();
  }
  // Optional bf16 "shadow" of parameter `index` (constructor order): every
  // later update of that parameter also writes the bf16 of each new value
  // (round to nearest even) into `shadow`, in the same pass over memory, so
  // an executor can stream it to the GPU without another pass. `shadow`
  // must be a contiguous bf16 tensor with the parameter's element count, on
  // the parameter's device (pinned host memory is fine for a CPU parameter;
  // on CUDA the fused update kernel writes it); it is filled from the current
  // parameter now. An undefined tensor removes the shadow.
  virtual void set_bf16_shadow(size_t index, Tensor shadow) = 0;
  // train.compile (issue 24): later updates run as kernels of the fusion
  // compiler (optim/compiled_adamw.h, compiled_adamw8bit.h) taken from
  // `cache`; null: the hand-written kernels again. Returns whether this
  // optimizer has compiled updates (those without keep the hand-written
  // ones and say so by returning false).
  virtual bool use_compiled_updates(std::shared_ptr<compile::KernelCache> cache) {
    (void)cache;
    return false;
  }
  // Parameter updates run through compiled kernels so far.
  virtual int64_t compiled_updates() const { return 0; }
  // Why the compiled updates stopped (empty: they did not): a kernel that
  // could not be had (not compiled; on a GPU without the compiler, not in
  // the cache folder). That update and every later one ran the hand-written
  // kernels.
  virtual std::string compiled_fallback() const { return {}; }
  // Writes the initial values of parameter `index`'s states (a fresh
  // optimizer's: zero moments) into the memory they point at now; its step
  // count stays. For states made without memory (AdamW's and AdamW8bit's
  // `states_without_memory`), once an executor that keeps them on disk has
  // given them memory, a stage at a time (Note [Stage states on disk]).
  virtual void reset_state(size_t index) {
    LT_CHECK(false, "this optimizer cannot reset the states of parameter ", index);
  }
  virtual NamedTensors state() const = 0;
  virtual void load_state(const NamedTensors& state) = 0;
};

}  // namespace lt::optim
