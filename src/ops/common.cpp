#include "ops/common.h"

namespace lt::ops {

DType compute_dtype(DType t) {
  return t == DType::F64 ? DType::F64 : DType::F32;
}

Tensor as_compute(const Tensor& t) {
  return t.to(compute_dtype(t.dtype())).contiguous();
}

void check_floating(const Tensor& t, const char* op) {
  LT_CHECK(is_floating(t.dtype()), op, ": expected a floating tensor, got ", t.str());
}

Device common_device(std::initializer_list<const Tensor*> tensors, const char* op) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
    } else {
      LT_CHECK(t->device() == first->device(), op, ": tensors on different devices (",
               first->device().str(), " and ", t->device().str(), ")");
    }
  }
  LT_CHECK(first != nullptr, op, ": no defined tensor");
  return first->device();
}

void no_kernel(const char* op, Device device) {
  fail(op, ": no kernel for device ", device.str(), " in this build");
}

}  // namespace lt::ops
