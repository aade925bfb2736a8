#pragma once
// The bf16 shadow copies the CPU optimizers write in their update pass
// (Optimizer::set_bf16_shadow): checks and the initial fill.
#include <string>

#include "core/tensor.h"

namespace lt::optim {

// Throws lt::Error, naming `who` and the parameter, unless `shadow` is a
// contiguous bf16 CPU tensor with `param`'s element count and `param` is a
// CPU tensor.
void check_bf16_shadow(const char* who, const std::string& name, const Tensor& param,
                       const Tensor& shadow);

// shadow[i] = bf16(param[i]) (round to nearest even), for every element.
void fill_bf16_shadow(const Tensor& param, const Tensor& shadow);

}  // namespace lt::optim
