#pragma once
// The kernel graphs the fusion compiler's GPU tests run
// (tests/gpu/compiled_kernels_gpu_test.cpp, and its benchmark), listed once
// so that a build with MLIR can compile every one of them ahead into a
// folder (LT_PREBUILD_GPU_KERNELS, tests/compile/gpu_prebuild_test.cpp)
// for the GPU machine, whose build has no MLIR (docs/compiler.md).
#include <cstdint>
#include <string>
#include <vector>

#include "compile/graph.h"
#include "compile/ptx.h"
#include "core/shape.h"

namespace lt::compile::testing {

// The tensor shape of a value of class `shape` over [rows, cols]: Full
// [rows, cols], Row [rows], Col [cols]; a Scalar throws.
Shape class_shape(ShapeClass shape, int64_t rows, int64_t cols);

struct GpuKernelCase {
  std::string name;  // "softmax bf16", "random chain seed 7"
  KernelGraph graph;
  int64_t rows = 0, cols = 0;  // what the tests run it on
};

// SwiGLU, GELU, softmax, residual + RMSNorm, LayerNorm, RoPE and AdamW, in
// f32 and bf16, and the backward graphs of SwiGLU, GELU, RMSNorm and
// LayerNorm.
std::vector<GpuKernelCase> named_chain_cases();

// testing::RandomChain with each of a fixed list of seeds (the same graphs
// on every machine: the generator is std::mt19937_64).
std::vector<GpuKernelCase> random_chain_cases();

// The same with table lookups among the ops (RandomChain's `lookups`:
// computed indices and u8 codes), seeds of their own.
std::vector<GpuKernelCase> random_lookup_chain_cases();

// RandomChain with f16 storage and casts and int8 inputs (its `halves`),
// seeds of their own.
std::vector<GpuKernelCase> random_half_chain_cases();

// Symmetric int8 quantization by a row's scale: the code of x / scale,
// clamped to [-127, 127] and rounded half away from zero (i8 storage keeps
// the integer part); and back, code * scale, stored as `dtype`.
KernelGraph int8_quantize(DType dtype);
// x / y of two full f32 values (the GPU's division at the edges of its range).
KernelGraph division_graph();
KernelGraph int8_dequantize(DType dtype);

// The target of the elementwise kernels' four-elements-a-thread form.
PtxTarget four_elements_target();
// The elementwise kernels' packed form: eight consecutive elements a
// thread, as vectors when aligned (compile/gpu_mlir.h).
PtxTarget packed_eight_target();
// packed_eight_target with the ColSums form's `rows` rows an iteration
// (GpuForms::col_sum_rows): training takes 2 (training_gpu_target).
PtxTarget col_sum_rows_target(int rows);

// Where the GPU tests find their kernels: $LT_GPU_KERNELS, else the kernel
// cache's default folder (~/.cache/lazytrain/kernels).
std::string gpu_test_kernel_folder();

}  // namespace lt::compile::testing
