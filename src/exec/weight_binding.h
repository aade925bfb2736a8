#pragma once
// Pointing a model's own parameter tensors at other memory, so that the
// model's code computes with a copy of its weights (a device slot) without
// knowing: every handle of a parameter (a module's field, a tied lm_head)
// shares its TensorImpl, so all of them follow.
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace lt::exec {

// For good: `param` reads `memory` (same shape, contiguous) from now on.
inline void point_at(const Tensor& param, const Tensor& memory) {
  TensorImpl* impl = param.impl();
  impl->storage = memory.storage();
  impl->offset = memory.offset();
  impl->strides = memory.strides();
  impl->dtype = memory.dtype();
}

// For its scope, the parameters point at `copies` (same shapes and
// strides); the destructor points them back.
class WeightBinding {
 public:
  WeightBinding(const std::vector<Tensor>& params, const std::vector<Tensor>& copies) {
    for (size_t i = 0; i < params.size(); ++i) {
      TensorImpl* impl = params[i].impl();
      saved_.push_back({impl, impl->storage, impl->offset, impl->dtype});
      impl->storage = copies[i].storage();
      impl->offset = copies[i].offset();
      impl->dtype = copies[i].dtype();
    }
  }
  ~WeightBinding() {
    for (auto& s : saved_) {
      s.impl->storage = std::move(s.storage);
      s.impl->offset = s.offset;
      s.impl->dtype = s.dtype;
    }
  }
  WeightBinding(const WeightBinding&) = delete;
  WeightBinding& operator=(const WeightBinding&) = delete;

 private:
  struct Saved {
    TensorImpl* impl;
    std::shared_ptr<Storage> storage;
    int64_t offset;
    DType dtype;
  };
  std::vector<Saved> saved_;
};

}  // namespace lt::exec
