#pragma once
// The bf16 shadow copies the optimizers write in their update pass
// (Optimizer::set_bf16_shadow): checks and the initial fill.
#include <string>

#include "core/tensor.h"

namespace lt::optim {

// Throws lt::Error, naming `who` and the parameter, unless `shadow` is a
// contiguous bf16 tensor with `param`'s element count on `param`'s device
// (the CPU, or a CUDA device: the CUDA update kernels write it there).
void check_bf16_shadow(const char* who, const std::string& name, const Tensor& param,
                       const Tensor& shadow);

// shadow[i] = bf16(param[i]) (round to nearest even), for every element, on
// their device (on CUDA queued on the current stream).
void fill_bf16_shadow(const Tensor& param, const Tensor& shadow);

}  // namespace lt::optim
