#include "optim/shadow.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace lt::optim {

void check_bf16_shadow(const char* who, const std::string& name, const Tensor& param,
                       const Tensor& shadow) {
  LT_CHECK(param.device().is_cpu(), who, "::set_bf16_shadow: parameter '", name,
           "' is not on the CPU (shadows are written by the CPU update), got ", param.str());
  LT_CHECK(shadow.device().is_cpu() && shadow.dtype() == DType::BF16 && shadow.is_contiguous() &&
               shadow.numel() == param.numel(),
           who, "::set_bf16_shadow: the shadow of '", name,
           "' must be a contiguous bf16 CPU tensor of ", param.numel(), " elements, got ",
           shadow.str());
}

void fill_bf16_shadow(const Tensor& param, const Tensor& shadow) {
  const float* p = static_cast<const float*>(param.data_ptr());
  auto* out = static_cast<uint16_t*>(shadow.data_ptr());
  parallel_for(0, param.numel(), int64_t{1} << 16, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) out[i] = f32_to_bf16(p[i]);
  });
}

}  // namespace lt::optim
