#include "optim/compiled_adamw.h"

#include <algorithm>
#include <array>
#include <span>

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

void write_adamw_scalars(const AdamWScalars& s, int64_t rows, float* out) {
  for (float x : {s.grad_scale, s.decay_factor, s.beta1, s.one_minus_beta1, s.beta2,
                  s.one_minus_beta2, s.bias_correction2_sqrt, s.eps, s.neg_step_size}) {
    out = std::fill_n(out, rows, x);
  }
}

Tensor adamw_scalar_table(const AdamWScalars& s, int64_t rows) {
  Tensor table = Tensor::empty({kAdamWScalarCount, rows}, DType::F32);
  write_adamw_scalars(s, rows, table.data<float>());
  return table;
}

std::vector<Tensor> adamw_scalar_tables(const std::vector<AdamWScalars>& s,
                                        const std::vector<int64_t>& rows,
                                        const std::vector<Device>& devices) {
  LT_CHECK(s.size() == rows.size() && s.size() == devices.size(), "adamw_scalar_tables: ", s.size(),
           " updates, ", rows.size(), " row counts, ", devices.size(), " devices");
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (int64_t r : rows) {
    offsets.push_back(total);
    total += kAdamWScalarCount * r;
  }
  const Tensor host = Tensor::empty({total}, DType::F32);
  for (size_t j = 0; j < s.size(); ++j)
    write_adamw_scalars(s[j], rows[j], host.data<float>() + offsets[j]);
  std::vector<std::pair<Device, Tensor>> moved;
  std::vector<Tensor> tables;
  for (size_t j = 0; j < s.size(); ++j) {
    auto found = std::find_if(moved.begin(), moved.end(),
                              [&](const auto& entry) { return entry.first == devices[j]; });
    if (found == moved.end()) {
      moved.emplace_back(devices[j], host.to(devices[j]));
      found = std::prev(moved.end());
    }
    tables.push_back(found->second.slice(0, offsets[j], offsets[j] + kAdamWScalarCount * rows[j])
                         .view({kAdamWScalarCount, rows[j]}));
  }
  return tables;
}

void append_scalar_rows(const Tensor& table, int64_t rows, std::vector<Tensor>& inputs) {
  LT_CHECK(table.dim() == 2 && table.size(0) == kAdamWScalarCount && table.size(1) >= rows &&
               table.dtype() == DType::F32 && table.is_contiguous(),
           "compiled AdamW: the scalars must be a contiguous f32 [9, >= ", rows, "] table, got ",
           table.str());
  for (int64_t field = 0; field < kAdamWScalarCount; ++field)
    inputs.push_back(table.select(0, field).slice(0, 0, rows));
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

void compiled_adamw_run(const CompiledUpdateKernel& kernel, const float* scalars,
                        int64_t scalar_stride, int64_t n, float* param, const void* grad,
                        DType grad_dtype, float* exp_avg, float* exp_avg_sq, void* bf16_copy) {
  const compile::KernelGraph& graph = kernel.graph;
  const size_t outputs = bf16_copy != nullptr ? 4 : 3;
  LT_CHECK(graph.inputs().size() == 4 + kAdamWScalarCount && graph.outputs().size() == outputs &&
               graph.inputs()[1].dtype == grad_dtype,
           "compiled_adamw_run: the kernel is not adamw_kernel_graph's for a ",
           dtype_name(grad_dtype), " gradient ", bf16_copy != nullptr ? "with" : "without",
           " the bf16 copy");
  // adamw_kernel_graph's buffers: p, g, m, v, the nine scalars, then the
  // bf16 copy (p, m and v are written over their inputs: no buffers).
  std::array<void*, 4 + kAdamWScalarCount + 1> buffers{};
  std::array<int64_t, buffers.size()> counts{};
  size_t k = 0;
  for (const void* state :
       {static_cast<const void*>(param), grad, static_cast<const void*>(exp_avg),
        static_cast<const void*>(exp_avg_sq)}) {
    buffers[k] = const_cast<void*>(state);  // the kernel reads g only
    counts[k++] = n;
  }
  for (int64_t field = 0; field < kAdamWScalarCount; ++field) {
    buffers[k] = const_cast<float*>(scalars + field * scalar_stride);  // read only
    counts[k++] = 1;
  }
  if (bf16_copy != nullptr) {
    buffers[k] = bf16_copy;
    counts[k++] = n;
  }
  compile::run_buffers(kernel.kernel, 1, n, std::span(buffers.data(), k),
                       std::span(counts.data(), k));
}

void compiled_adamw_update(compile::KernelCache& cache, const AdamWScalars& s, const Tensor& param,
                           const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const Tensor& bf16_copy) {
  CompiledUpdateKernel kernel;
  kernel.graph = adamw_kernel_graph(grad.dtype(), bf16_copy.defined());
  kernel.kernel = compile::kernel_for(cache, kernel.graph, grad.device());
  compiled_adamw_update(kernel, adamw_scalar_table(s, 1).to(grad.device()), param, grad, exp_avg,
                        exp_avg_sq, bf16_copy);
}

void compiled_adamw_update(const CompiledUpdateKernel& kernel, const Tensor& scalar_table,
                           const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                           const Tensor& exp_avg_sq, const Tensor& bf16_copy) {
  const int64_t n = grad.numel();
  const Device device = grad.device();
  LT_CHECK(kernel.kernel.device == device, "compiled_adamw_update: the kernel is for ",
           kernel.kernel.device.str(), ", the gradient on ", device.str());
  for (const Tensor* t : {&param, &exp_avg, &exp_avg_sq}) {
    LT_CHECK(
        t->dtype() == DType::F32 && t->numel() == n && t->is_contiguous() && t->device() == device,
        "compiled_adamw_update: param and states must be contiguous f32 tensors of ", n,
        " elements on ", device.str(), " (the gradient's device), got ", t->str());
  }
  LT_CHECK(!bf16_copy.defined() || (bf16_copy.dtype() == DType::BF16 && bf16_copy.numel() == n),
           "compiled_adamw_update: the bf16 copy must be bf16 of ", n, " elements");
  const bool copy_direct =
      bf16_copy.defined() && bf16_copy.device() == device && bf16_copy.is_contiguous();
  if (grad.is_contiguous() && (!bf16_copy.defined() || copy_direct)) {
    LT_CHECK(scalar_table.dim() == 2 && scalar_table.size(0) == kAdamWScalarCount &&
                 scalar_table.size(1) >= 1 && scalar_table.dtype() == DType::F32 &&
                 scalar_table.is_contiguous() && scalar_table.device() == device,
             "compiled_adamw_update: the scalars must be a contiguous f32 [9, >= 1] table on ",
             device.str(), ", got ", scalar_table.str());
    compiled_adamw_run(kernel, static_cast<const float*>(scalar_table.data_ptr()),
                       scalar_table.size(1), n, static_cast<float*>(param.data_ptr()),
                       grad.data_ptr(), grad.dtype(), static_cast<float*>(exp_avg.data_ptr()),
                       static_cast<float*>(exp_avg_sq.data_ptr()),
                       bf16_copy.defined() ? bf16_copy.data_ptr() : nullptr);
    return;
  }
  // Otherwise through tensors: the gradient made contiguous, the copy
  // written where it is.
  const Shape row{1, n};
  std::vector<Tensor> inputs{param.reshape(row), grad.contiguous().reshape(row),
                             exp_avg.reshape(row), exp_avg_sq.reshape(row)};
  append_scalar_rows(scalar_table, 1, inputs);
  std::vector<Tensor> given(3);
  if (bf16_copy.defined()) given.push_back(copy_direct ? bf16_copy.reshape(row) : Tensor());
  const std::vector<Tensor> out = compile::call(kernel.kernel, kernel.graph, inputs, given);
  if (bf16_copy.defined() && !copy_direct) bf16_copy.copy_(out[3].reshape(bf16_copy.shape()));
}

}  // namespace lt::optim
