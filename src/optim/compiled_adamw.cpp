#include "optim/compiled_adamw.h"

#include "compile/gpu_kernel.h"
#include "compile/tensor_call.h"
#include "core/error.h"

namespace lt::optim {

using compile::ShapeClass;
using compile::Value;

AdamWScalarValues adamw_scalar_inputs(compile::KernelGraph& k) {
  auto scalar = [&] { return k.input(ShapeClass::Row, DType::F32); };
  AdamWScalarValues s;
  for (Value* v : {&s.grad_scale, &s.decay_factor, &s.beta1, &s.one_minus_beta1, &s.beta2,
                   &s.one_minus_beta2, &s.bias_correction2_sqrt, &s.eps, &s.neg_step_size}) {
    *v = scalar();
  }
  return s;
}

std::vector<Tensor> adamw_scalar_rows(const AdamWScalars& s, int64_t rows) {
  std::vector<Tensor> out;
  for (float x : {s.grad_scale, s.decay_factor, s.beta1, s.one_minus_beta1, s.beta2,
                  s.one_minus_beta2, s.bias_correction2_sqrt, s.eps, s.neg_step_size}) {
    out.push_back(Tensor::full({rows}, x, DType::F32));
  }
  return out;
}

AdamWStepValues adamw_step(compile::KernelGraph& k, const AdamWScalarValues& s, Value p, Value grad,
                           Value m, Value v) {
  const Value g = k.mul(grad, s.grad_scale);
  AdamWStepValues out;
  out.m = k.add(k.mul(s.beta1, m), k.mul(s.one_minus_beta1, g));
  out.v = k.add(k.mul(s.beta2, v), k.mul(k.mul(s.one_minus_beta2, g), g));
  const Value decayed = k.mul(p, s.decay_factor);
  out.sqrt_v = k.sqrt(out.v);
  const Value denominator = k.add(k.div(out.sqrt_v, s.bias_correction2_sqrt), s.eps);
  out.p = k.add(decayed, k.div(k.mul(s.neg_step_size, out.m), denominator));
  return out;
}

compile::KernelGraph adamw_kernel_graph(DType grad_dtype, bool with_bf16_copy) {
  compile::KernelGraph k;
  const Value p = k.input(ShapeClass::Full, DType::F32);
  const Value grad = k.input(ShapeClass::Full, grad_dtype);
  const Value m = k.input(ShapeClass::Full, DType::F32);
  const Value v = k.input(ShapeClass::Full, DType::F32);
  const AdamWStepValues next = adamw_step(k, adamw_scalar_inputs(k), p, grad, m, v);
  // p and the states in place (KernelGraph::output_over): no buffers to
  // allocate and copy back.
  k.output_over(next.p, p);
  k.output_over(next.m, m);
  k.output_over(next.v, v);
  if (with_bf16_copy) k.output(next.p, DType::BF16);
  return k;
}

void compiled_adamw_update(compile::KernelCache& cache, const AdamWScalars& s, const Tensor& param,
                           const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const Tensor& bf16_copy) {
  const int64_t n = grad.numel();
  const Device device = grad.device();
  for (const Tensor* t : {&param, &exp_avg, &exp_avg_sq}) {
    LT_CHECK(
        t->dtype() == DType::F32 && t->numel() == n && t->is_contiguous() && t->device() == device,
        "compiled_adamw_update: param and states must be contiguous f32 tensors of ", n,
        " elements on ", device.str(), " (the gradient's device), got ", t->str());
  }
  LT_CHECK(!bf16_copy.defined() || (bf16_copy.dtype() == DType::BF16 && bf16_copy.numel() == n),
           "compiled_adamw_update: the bf16 copy must be bf16 of ", n, " elements");
  const compile::KernelGraph graph = adamw_kernel_graph(grad.dtype(), bf16_copy.defined());
  const compile::DeviceKernel kernel = compile::kernel_for(cache, graph, device);
  const Shape row{1, n};
  std::vector<Tensor> inputs{param.reshape(row), grad.contiguous().reshape(row),
                             exp_avg.reshape(row), exp_avg_sq.reshape(row)};
  for (Tensor& t : adamw_scalar_rows(s, 1)) inputs.push_back(t.to(device));
  // p and the states are written in place (adamw_kernel_graph); the bf16
  // copy straight into it where it is a contiguous tensor on this device.
  const bool copy_direct =
      bf16_copy.defined() && bf16_copy.device() == device && bf16_copy.is_contiguous();
  std::vector<Tensor> given(3);
  if (bf16_copy.defined()) given.push_back(copy_direct ? bf16_copy.reshape(row) : Tensor());
  const std::vector<Tensor> out = compile::call(kernel, graph, inputs, given);
  if (bf16_copy.defined() && !copy_direct) bf16_copy.copy_(out[3].reshape(bf16_copy.shape()));
}

}  // namespace lt::optim
