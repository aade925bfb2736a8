#pragma once
// The raw cuBLASLt wrapper: one column-major (batched) product on the
// current stream, with per-device handles, per-stream workspaces and a
// per-shape cache of the heuristic's algorithm. ops/cuda/gemm.h maps
// row-major tensors onto it; CUDA code that has raw pointers may call it
// directly.
#include <cublasLt.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

// Every cuBLAS(Lt) call goes through LT_CUBLAS_CHECK, which names the call,
// the file and the line (the cuBLAS twin of LT_CUDA_CHECK).
#define LT_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                             \
    cublasStatus_t lt_cublas_status = (call);                                                      \
    if (lt_cublas_status != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                                  \
      ::lt::fail("cuBLAS error ", cublasLtGetStatusName(lt_cublas_status), " (",                   \
                 cublasLtGetStatusString(lt_cublas_status), ") in `" #call "` at ", __FILE__, ":", \
                 __LINE__);                                                                        \
    }                                                                                              \
  } while (0)

namespace lt::ops::cuda {

// One operand as cuBLASLt sees it: a column-major matrix of `rows` x
// `cols` with leading dimension `ld` (elements) that the product reads
// transposed when `transposed`. `batch_stride` is in elements (0 when
// there is one matrix).
struct LtOperand {
  const void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 1;
  bool transposed = false;
  int64_t batch_stride = 0;
};

// D = op(A) op(B) [+ D when accumulate] [+ bias[i] on every row i of D],
// for `batch` matrices, column-major: op(A) is m x k, op(B) k x n, D m x n.
// All of `dtype` (bias included); see gemm.h for the arithmetic. The
// product reads C from D (in place).
struct LtGemm {
  int device = 0;
  DType dtype = DType::F32;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  LtOperand a, b;
  void* d = nullptr;
  int64_t ldd = 1, batch_stride_d = 0;
  bool accumulate = false;
  const void* bias = nullptr;  // m elements, or null
};

// Runs the product on the device's current stream. Returns false, having
// done nothing, when a bias was asked for and cuBLASLt offers no algorithm
// with the bias epilogue for this problem (the caller then adds the bias
// another way); throws lt::Error for any other failure.
bool lt_matmul(const LtGemm& g);

}  // namespace lt::ops::cuda
