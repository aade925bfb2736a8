#include "optim/shadow.h"

#include "autograd/grad_mode.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace lt::optim {

void check_bf16_shadow(const char* who, const std::string& name, const Tensor& param,
                       const Tensor& shadow) {
  // A master without memory yet (its stage starts on disk) is a host
  // tensor once it has it.
  const Device device = param.storage() ? param.device() : Device::cpu();
  LT_CHECK(device.is_cpu() || device.is_cuda(), who, "::set_bf16_shadow: parameter '", name,
           "' is neither on the CPU nor on a CUDA device, got ", param.str());
  LT_CHECK(shadow.device() == device && shadow.dtype() == DType::BF16 && shadow.is_contiguous() &&
               shadow.numel() == param.numel(),
           who, "::set_bf16_shadow: the shadow of '", name,
           "' must be a contiguous bf16 tensor on ", device.str(), " of ", param.numel(),
           " elements, got ", shadow.str());
}

void fill_bf16_shadow(const Tensor& param, const Tensor& shadow) {
  if (!param.device().is_cpu()) {
    // The shadow may be a parameter that requires grad (the bf16 compute
    // model's): filling it is not part of any graph.
    NoGradGuard no_grad;
    shadow.view(param.shape()).copy_(param);
    return;
  }
  const float* p = static_cast<const float*>(param.data_ptr());
  auto* out = static_cast<uint16_t*>(shadow.data_ptr());
  parallel_for(0, param.numel(), int64_t{1} << 16, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) out[i] = f32_to_bf16(p[i]);
  });
}

}  // namespace lt::optim
