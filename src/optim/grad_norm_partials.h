#pragma once
// The global gradient norm without a separate pass over the gradients: each
// parameter's sum of squares is taken where its gradient becomes final, in
// the backward that finalizes it (a grad-ready hook, autograd/engine.cpp),
// and one small reduction at the end adds them. The resident executor arms
// it for the last micro-batch's backward only; earlier micro-batches'
// gradients are still accumulated into and are not final.
//
// Every parameter owns a fixed run of partial slots, one per chunk of its
// gradient, laid out in parameter order as optim/clip.h cuts them (64K
// elements; chunk_count in optim/cuda/grad_norm.h on a GPU). A gradient
// writes (not adds to) its slots, so the result does not depend on the
// order the hooks fire in, and the final sum adds every slot in one fixed
// order: with every parameter holding a gradient it is exactly
// grad_squared_sum's result (on the CPU; on a GPU the same first pass, and
// the final pass's order differs only where a parameter has no gradient).
//
//  - CPU: the hook computes its gradient's chunk sums right there (on the
//    thread pool), while the gradient is hot in cache.
//  - CUDA: the hook records an event on the current (compute) stream and a
//    side stream waits on it and runs one launch over that gradient's
//    chunks, so the reads overlap the rest of the backward. finish() makes
//    the compute stream wait for the side stream, adds the slots there in
//    one block and copies the total into page-locked host memory; the
//    caller's own wait for the device (the executor synchronizes at the end
//    of its backward anyway) makes it readable. No host wait per parameter.
//
// Memory safety on CUDA: a gradient the side stream reads is also held
// here (the contiguous tensor the kernel reads) from its hook until
// squared_sum() has seen the read-back complete, and the read-back is
// ordered after all side-stream work (the join in finish()). So no
// gradient can be freed, and its block reused by the compute stream, while
// a side-stream kernel still reads it, whatever the caller does with the
// parameters' .grad meanwhile. The slot buffer lives as long as this object;
// the destructor waits for the side stream first. A step abandoned between
// arm() and squared_sum() (an exception) is drained by the next begin().
//
// Gradients that change after their hook: finish() compares every
// parameter's .grad with the tensor its hook saw. A gradient that appeared
// without a hook in the armed backward (made by an earlier backward only),
// or was replaced by another tensor, is taken then (one launch each, on the
// same side stream); one removed after its hook has its slots cleared. An
// in-place edit of the same tensor after its hook is not seen on the CPU,
// and on a GPU races with the side stream's read: callers must not edit
// gradients in place between arm() and squared_sum() (the resident
// executor does not).
#include <memory>

#include "nn/module.h"

namespace lt::optim {

class GradNormPartials {
 public:
  // `params`: distinct tensors, all on one device (the CPU or a CUDA
  // device); their gradients are f32 or bf16 with the parameters' shapes.
  // Registers one grad-ready hook on each leaf that requires grad (a frozen
  // one has no hook and normally no gradient). Hooks cannot
  // be removed: they hold only a weak reference and do nothing once this
  // object is gone, or while it is not armed.
  explicit GradNormPartials(const nn::NamedParameters& params);
  ~GradNormPartials();
  GradNormPartials(const GradNormPartials&) = delete;
  GradNormPartials& operator=(const GradNormPartials&) = delete;

  // Starts a step: every slot is zero (a parameter without a gradient
  // contributes nothing), nothing is armed.
  void begin();
  // From now until disarm() or finish(), each parameter's gradient is
  // taken when it becomes final (its hook fires); a later hook of the same
  // parameter overwrites its slots.
  void arm();
  void disarm();
  // Disarms, takes the gradients the hooks missed (see above), and enqueues
  // the final sum (on a GPU: on the current stream, after the side
  // stream's work). Does not wait.
  void finish();
  // The sum of squares of every gradient finish() saw; waits for the GPU's
  // read-back if the caller has not already waited for the device. Drops
  // this object's references to the gradients.
  double squared_sum();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace lt::optim
