#include "support/gpu_kernel_cases.h"

#include <cstdlib>

#include "autograd/fused_rope.h"
#include "compile/chains.h"
#include "compile/gradient.h"
#include "compile/kernel_cache.h"
#include "core/error.h"
#include "core/random.h"
#include "optim/compiled_adamw.h"
#include "support/random_kernel_chain.h"

namespace lt::compile::testing {

std::vector<GpuKernelCase> named_chain_cases() {
  std::vector<GpuKernelCase> cases;
  // 67 rows of 1000 columns: not a multiple of the 256 threads of a block
  // nor of a warp, so the loops' tails and the partial warps run.
  const int64_t rows = 67, cols = 1000;
  for (DType dtype : {DType::F32, DType::BF16}) {
    const std::string suffix = dtype == DType::BF16 ? " bf16" : " f32";
    const KernelGraph swiglu = swiglu_forward(dtype);
    const KernelGraph rms = residual_rms_norm_forward(dtype, 1e-5);
    const KernelGraph layer_norm = layer_norm_forward(dtype, 1e-5);
    cases.push_back({"swiglu" + suffix, swiglu, rows, cols});
    cases.push_back({"gelu_tanh" + suffix, gelu_tanh_forward(dtype), rows, cols});
    cases.push_back({"softmax" + suffix, softmax_forward(dtype), rows, cols});
    cases.push_back({"residual_rms_norm" + suffix, rms, rows, cols});
    cases.push_back({"layer_norm" + suffix, layer_norm, rows, cols});
    // 536 head vectors of 4 heads; 64 pairs (one pack of 8 is in one row).
    const KernelGraph rope = autograd::rope_kernel_graph(dtype, 4);
    cases.push_back({"rope" + suffix, rope, rows * 8, 64});
    cases.push_back({"rope backward" + suffix, autograd::rope_gradient_graph(rope), rows * 8, 64});
    // AdamW's elements are one row (its scalars are row values).
    cases.push_back(
        {"adamw" + suffix + " grads", optim::adamw_kernel_graph(dtype, true), 1, rows * cols});
    cases.push_back({"swiglu backward" + suffix, gradient_graph(swiglu, {true, true}), rows, cols});
    // and tests/gpu/gelu_accuracy_gpu_test.cpp's (testing::gelu_cases)
    const KernelGraph gelu = gelu_tanh_forward(dtype);
    cases.push_back({"gelu_tanh backward" + suffix, gradient_graph(gelu, {true}), rows, cols});
    if (dtype == DType::BF16) {
      cases.push_back({"gelu_tanh backward, bf16 gradients",
                       gradient_graph(gelu, {true}, GradientStorage::AsTheForward), rows, cols});
    }
    cases.push_back({"residual_rms_norm backward" + suffix, gradient_graph(rms, {true, true, true}),
                     rows, cols});
    cases.push_back({"layer_norm backward" + suffix, gradient_graph(layer_norm, {true, true, true}),
                     rows, cols});
  }
  // f16 storage (the chains round each call's result to f16, as bf16's).
  const DType f16 = DType::F16;
  const KernelGraph layer_norm = layer_norm_forward(f16, 1e-5);
  cases.push_back({"swiglu f16", swiglu_forward(f16), rows, cols});
  cases.push_back({"softmax f16", softmax_forward(f16), rows, cols});
  cases.push_back({"residual_rms_norm f16", residual_rms_norm_forward(f16, 1e-5), rows, cols});
  cases.push_back({"layer_norm f16", layer_norm, rows, cols});
  cases.push_back(
      {"layer_norm backward f16", gradient_graph(layer_norm, {true, true, true}), rows, cols});
  cases.push_back({"int8 quantize", int8_quantize(DType::BF16), rows, cols});
  cases.push_back({"int8 dequantize", int8_dequantize(DType::BF16), rows, cols});
  return cases;
}

KernelGraph int8_quantize(DType dtype) {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, dtype);
  const Value scale = g.input(ShapeClass::Row, DType::F32);
  const Value q = g.div(x, scale);
  // min(q, 127) = -max(-q, -127); then at least -127
  const Value clamped = g.max(g.neg(g.max(g.neg(q), g.constant(-127.0))), g.constant(-127.0));
  const Value half = g.select(g.less(clamped, g.constant(0.0)), g.constant(-0.5), g.constant(0.5));
  g.output(g.add(clamped, half), DType::I8);
  return g;
}

KernelGraph division_graph() {
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, DType::F32);  // input 0, then 1
  const Value y = g.input(ShapeClass::Full, DType::F32);
  g.output(g.div(x, y), DType::F32);
  return g;
}

KernelGraph int8_dequantize(DType dtype) {
  KernelGraph g;
  const Value code = g.input(ShapeClass::Full, DType::I8);
  const Value scale = g.input(ShapeClass::Row, DType::F32);
  g.output(g.mul(code, scale), dtype);
  return g;
}

namespace {

std::vector<GpuKernelCase> random_cases(uint64_t first_seed, uint64_t last_seed, bool lookups,
                                        const std::string& name, bool halves = false) {
  std::vector<GpuKernelCase> cases;
  for (uint64_t seed = first_seed; seed <= last_seed; ++seed) {
    Generator gen(seed);
    const auto choose = [&gen](int lo, int hi) {
      return lo + static_cast<int>(gen.below(static_cast<uint64_t>(hi - lo)));
    };
    RandomChain chain(choose, lookups, halves);
    chain.build();
    // Up to 700 columns: one to three strides of a block's 256 threads.
    const int64_t rows = choose(1, 40), cols = choose(1, 701);
    cases.push_back({name + " seed " + std::to_string(seed), chain.graph, rows, cols});
  }
  return cases;
}

}  // namespace

std::vector<GpuKernelCase> random_chain_cases() {
  return random_cases(1, 60, false, "random chain");
}

std::vector<GpuKernelCase> random_lookup_chain_cases() {
  return random_cases(101, 130, true, "random lookup chain");
}

std::vector<GpuKernelCase> random_half_chain_cases() {
  return random_cases(201, 240, false, "random f16 and i8 chain", true);
}

Shape class_shape(ShapeClass shape, int64_t rows, int64_t cols) {
  switch (shape) {
    case ShapeClass::Full:
      return {rows, cols};
    case ShapeClass::Row:
      return {rows};
    case ShapeClass::Col:
      return {cols};
    case ShapeClass::Scalar:
      break;
  }
  fail("a kernel value is full, row or col");
}

PtxTarget four_elements_target() {
  PtxTarget target;
  target.forms.elements_per_thread = 4;
  return target;
}

PtxTarget packed_eight_target() {
  PtxTarget target;
  target.forms.elements_per_thread = 8;
  target.forms.packed = true;
  return target;
}

PtxTarget col_sum_rows_target(int rows) {
  PtxTarget target = packed_eight_target();
  target.forms.col_sum_rows = rows;
  return target;
}

std::string gpu_test_kernel_folder() {
  const char* folder = std::getenv("LT_GPU_KERNELS");
  return folder != nullptr && *folder != '\0' ? folder : KernelCache::default_folder();
}

}  // namespace lt::compile::testing
