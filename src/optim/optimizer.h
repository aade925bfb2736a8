#pragma once
// What an executor needs from an optimizer: one update per step and its
// checkpoint state. AdamW (fp32 states) and AdamW8bit (blockwise 8-bit
// states) implement it, so the trainer picks one by optim.name.
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace lt::optim {

// Named tensors, in a fixed order (a checkpoint file's layout).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // `lr`: this step's rate; `grad_scale`: the clip factor folded in.
  virtual void step(double lr, double grad_scale) = 0;
  virtual NamedTensors state() const = 0;
  virtual void load_state(const NamedTensors& state) = 0;
};

}  // namespace lt::optim
