#include "autograd/cross_entropy_kernels.h"

namespace lt::autograd {

namespace {

thread_local std::shared_ptr<compile::KernelCache> current;

}  // namespace

CrossEntropyKernelsScope::CrossEntropyKernelsScope(std::shared_ptr<compile::KernelCache> cache)
    : previous_(std::move(current)) {
  current = std::move(cache);
}

CrossEntropyKernelsScope::~CrossEntropyKernelsScope() {
  current = std::move(previous_);
}

std::shared_ptr<compile::KernelCache> cross_entropy_kernels() {
  return current;
}

}  // namespace lt::autograd
