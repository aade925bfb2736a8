#include "nn/module.h"

namespace lt::nn {

Tensor make_parameter(Tensor value, const std::string& name) {
  Tensor p = value.detach();
  p.set_requires_grad(true);
  p.set_name(name);
  return p;
}

Tensor normal_parameter(const Shape& shape, double stddev, Generator* gen, DType dtype,
                        const std::string& name) {
  if (gen == nullptr) return make_parameter(Tensor::empty(shape, dtype), name);
  return make_parameter(Tensor::randn(shape, *gen, dtype, stddev), name);
}

Tensor constant_parameter(const Shape& shape, double value, DType dtype, const std::string& name,
                          bool initialize) {
  if (!initialize) return make_parameter(Tensor::empty(shape, dtype), name);
  return make_parameter(Tensor::full(shape, value, dtype), name);
}

}  // namespace lt::nn
