#pragma once
// Modules hold parameters (leaf tensors that require grad) and compose the
// differentiable functions of autograd/functions.h. There is no module
// registry or dynamic dispatch: each module lists its own parameters in a
// fixed order, which is also the order checkpoints and optimizers use.
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace lt::nn {

using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

// A fresh parameter: a leaf that requires grad, named for error messages.
Tensor make_parameter(Tensor value, const std::string& name);
// Normal(0, stddev) init as Hugging Face's _init_weights does for Linear and
// Embedding (stddev = initializer_range, 0.02 by default). A null `gen`
// leaves the values uninitialized, for parameters about to be loaded.
Tensor normal_parameter(const Shape& shape, double stddev, Generator* gen, DType dtype,
                        const std::string& name);
// Ones for norm weights, zeros for biases (skipped, like normal_parameter,
// when `initialize` is false).
Tensor constant_parameter(const Shape& shape, double value, DType dtype, const std::string& name,
                          bool initialize = true);

inline std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace lt::nn
