#pragma once
// Strided, batched matrix products on a GPU through cuBLASLt: the CUDA
// sibling of ops/cpu/gemm.h, with the same forms, so ops/matmul.cpp builds
// matmul, linear and their backward passes on either. Declared without
// CUDA types so that ops/matmul.cpp includes it in every build; defined
// only when LT_WITH_CUDA (gemm.cu). The raw cuBLASLt wrapper is gemm.cuh.
#include "core/tensor.h"

namespace lt::ops::cuda {

// c = a @ b (+ bias), or c += a @ b when `accumulate`, on the current
// stream of the tensors' device. All on one CUDA device and of one dtype:
// bf16 and f16 multiply in their own type and accumulate in f32, f32 uses
// TF32 tensor cores (10-bit mantissa products, f32 accumulation), f64 is
// exact f64. Forms, as for cpu::gemm:
//   a [..., M, K], b [..., K, N], c [..., M, N]   (same batch dims)
//   a [..., M, K], b [K, N],      c [..., M, N]   (b shared: the batch joins M)
//   a [..., M, K], b [..., K, N], c [M, N]        (products summed over the batch)
// `bias` ([N], optional, not with `accumulate`) is added to every row of c,
// in the GEMM's epilogue where cuBLASLt offers one for the shapes.
// Operands of any strides are accepted: a transposed view reaches cuBLASLt
// as a transpose flag; one it cannot address is copied contiguous first,
// and so is an output it cannot write (computed aside, then copied in).
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate,
          const Tensor& bias = Tensor());

}  // namespace lt::ops::cuda
