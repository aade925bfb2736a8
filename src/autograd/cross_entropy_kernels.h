#pragma once
// train.compile (issue 24): where lm_head_loss takes compiled softmax
// cross-entropy kernels from (compile/cross_entropy_chain.h): the cache of
// the innermost scope open on this thread. models::CompiledBlocks opens one
// around the head stage. Without a scope, or for logits that are not f32 or
// bf16 on the CPU, lm_head_loss runs the hand-written kernels. Its
// backward keeps the cache it saw in the forward.
#include <memory>

#include "compile/kernel_cache.h"

namespace lt::autograd {

class CrossEntropyKernelsScope {
 public:
  explicit CrossEntropyKernelsScope(std::shared_ptr<compile::KernelCache> cache);
  ~CrossEntropyKernelsScope();
  CrossEntropyKernelsScope(const CrossEntropyKernelsScope&) = delete;
  CrossEntropyKernelsScope& operator=(const CrossEntropyKernelsScope&) = delete;

 private:
  std::shared_ptr<compile::KernelCache> previous_;
};

// The innermost open scope's cache on this thread, or null.
std::shared_ptr<compile::KernelCache> cross_entropy_kernels();

}  // namespace lt::autograd
