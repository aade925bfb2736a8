#include "ops/cpu/gemm.h"
#include "ops/matrix_layout.h"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace lt::ops::cpu {

namespace {

using BlasOperand = MatrixAddressing;

std::optional<BlasOperand> blas_operand(const MatrixView& m) {
  return matrix_addressing(m);
}

// Element offset of matrix `index` (row-major over `batch`) of t; a 2D
// tensor is one matrix shared by every index.
int64_t batch_offset(const Tensor& t, const Shape& batch, int64_t index) {
  int64_t offset = t.offset();
  if (t.dim() == 2) return offset;
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    offset += (index % batch[d]) * t.stride(d);
    index /= batch[d];
  }
  return offset;
}

blasint to_blas_int(int64_t v) {
  LT_CHECK(v <= static_cast<int64_t>(std::numeric_limits<blasint>::max()), "gemm: size ", v,
           " exceeds the BLAS integer range");
  return static_cast<blasint>(v);
}

CBLAS_TRANSPOSE blas_flag(bool transposed) {
  return transposed ? CblasTrans : CblasNoTrans;
}

void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, blas_flag(ta), blas_flag(tb), to_blas_int(m), to_blas_int(n),
              to_blas_int(k), 1.0f, a, to_blas_int(lda), b, to_blas_int(ldb), beta, c,
              to_blas_int(ldc));
}

void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, blas_flag(ta), blas_flag(tb), to_blas_int(m), to_blas_int(n),
              to_blas_int(k), 1.0, a, to_blas_int(lda), b, to_blas_int(ldb), beta, c,
              to_blas_int(ldc));
}

// c = a @ b + beta c for one [m, k] x [k, n] product.
template <typename T>
void gemm_2d(const T* a, BlasOperand la, const T* b, BlasOperand lb, T* c, BlasOperand lc,
             int64_t m, int64_t n, int64_t k, T beta) {
  if (lc.transposed) {
    // BLAS writes only row-major outputs; c's storage holds c^T = b^T a^T,
    // so compute that with every operand's flag flipped.
    blas_gemm(!lb.transposed, !la.transposed, n, m, k, b, lb.ld, a, la.ld, beta, c, lc.ld);
  } else {
    blas_gemm(la.transposed, lb.transposed, m, n, k, a, la.ld, b, lb.ld, beta, c, lc.ld);
  }
}

template <typename T>
const T* base_of(const Tensor& t) {
  return static_cast<const T*>(t.storage()->data());
}

// Runs the whole product as a single BLAS call over the 2D matrices a2, b2,
// c2 when all three are addressable; false when one is not.
template <typename T>
bool try_single_call(const Tensor& a2, const Tensor& b2, const Tensor& c2, T beta) {
  const MatrixView ma = matrix_view(a2), mc = matrix_view(c2);
  auto la = blas_operand(ma), lb = blas_operand(matrix_view(b2)), lc = blas_operand(mc);
  if (!la || !lb || !lc) return false;
  T* c = const_cast<T*>(base_of<T>(c2)) + c2.offset();
  gemm_2d<T>(base_of<T>(a2) + a2.offset(), *la, base_of<T>(b2) + b2.offset(), *lb, c, *lc, mc.rows,
             mc.cols, ma.cols, beta);
  return true;
}

template <typename T>
void gemm_typed(Tensor a, Tensor b, const Tensor& c, bool accumulate) {
  const T beta = accumulate ? T{1} : T{0};
  const bool reduce = c.dim() == 2 && a.dim() > 2;
  if (reduce) {
    // sum_i a_i b_i = [a_0 a_1 ...] @ [b_0; b_1; ...]: the batch joins K.
    auto a_joined_t = merge_batch_into_rows(transpose_last(a));  // [batch * K, M]
    auto b_joined = merge_batch_into_rows(b);                    // [batch * K, N]
    if (a_joined_t && b_joined &&
        try_single_call<T>(transpose_last(*a_joined_t), *b_joined, c, beta)) {
      return;
    }
  } else if (b.dim() == 2 && a.dim() > 2) {
    // A shared b: the batch joins M, so the whole batch is one product.
    auto a_joined = merge_batch_into_rows(a), c_joined = merge_batch_into_rows(c);
    if (a_joined && c_joined && try_single_call<T>(*a_joined, b, *c_joined, beta)) return;
  }

  // One call per matrix. Strides are the same for every matrix of a
  // tensor, so one copy up front settles an operand BLAS cannot address.
  if (!blas_operand(matrix_view(a))) a = a.contiguous();
  if (!blas_operand(matrix_view(b))) b = b.contiguous();
  const BlasOperand la = *blas_operand(matrix_view(a)), lb = *blas_operand(matrix_view(b));
  const auto lc = blas_operand(matrix_view(c));
  LT_CHECK(lc.has_value(), "gemm: output ", c.str(), " has strides BLAS cannot write");
  const Shape batch(a.shape().begin(), a.shape().end() - 2);
  const MatrixView ma = matrix_view(a), mc = matrix_view(c);
  const T* pa = base_of<T>(a);
  const T* pb = base_of<T>(b);
  T* pc = const_cast<T*>(base_of<T>(c));
  // A plain loop: OpenBLAS threads each call itself, and calling it from
  // our pool's workers as well would oversubscribe the cores.
  const int64_t count = numel(batch);
  for (int64_t i = 0; i < count; ++i) {
    // Summing over the batch: the first product honours `accumulate`, the
    // rest add to it.
    const T beta_i = reduce && i > 0 ? T{1} : beta;
    gemm_2d<T>(pa + batch_offset(a, batch, i), la, pb + batch_offset(b, batch, i), lb,
               pc + batch_offset(c, batch, i), *lc, mc.rows, mc.cols, ma.cols, beta_i);
  }
}

std::string shapes_str(const Tensor& a, const Tensor& b, const Tensor& c) {
  return shape_str(a.shape()) + " @ " + shape_str(b.shape()) + " -> " + shape_str(c.shape());
}

}  // namespace

Tensor transpose_last(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  const size_t n = shape.size();
  LT_CHECK(n >= 2, "transpose_last needs rank >= 2, got ", t.str());
  std::swap(shape[n - 1], shape[n - 2]);
  std::swap(strides[n - 1], strides[n - 2]);
  return Tensor::from_storage(t.storage(), t.offset(), shape, strides, t.dtype());
}

void gemm(const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate) {
  LT_CHECK(a.dim() >= 2 && b.dim() >= 2 && c.dim() >= 2,
           "gemm: operands need rank >= 2: ", shapes_str(a, b, c));
  LT_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype() &&
               (a.dtype() == DType::F32 || a.dtype() == DType::F64),
           "gemm: operands must share dtype f32 or f64, got ", a.str(), ", ", b.str(), ", ",
           c.str());
  LT_CHECK(a.device().is_cpu() && b.device().is_cpu() && c.device().is_cpu(),
           "gemm: CPU tensors only");
  const MatrixView ma = matrix_view(a), mb = matrix_view(b), mc = matrix_view(c);
  LT_CHECK(ma.rows == mc.rows && ma.cols == mb.rows && mb.cols == mc.cols,
           "gemm: matrix sizes do not chain: ", shapes_str(a, b, c));
  const Shape batch(a.shape().begin(), a.shape().end() - 2);
  auto batch_of = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
  if (c.dim() > 2) {
    LT_CHECK(batch_of(c) == batch && (b.dim() == 2 || batch_of(b) == batch),
             "gemm: batch dims differ: ", shapes_str(a, b, c));
  } else {
    // c without batch dims: either nothing is batched or the batch is summed.
    LT_CHECK(a.dim() == 2 ? b.dim() == 2 : batch_of(b) == batch,
             "gemm: batch dims differ: ", shapes_str(a, b, c));
  }
  if (c.numel() == 0) return;
  if (a.numel() == 0 || b.numel() == 0) {  // K == 0 or an empty summed batch
    if (!accumulate) c.zero_();
    return;
  }
  if (a.dtype() == DType::F64) {
    gemm_typed<double>(a, b, c, accumulate);
  } else {
    gemm_typed<float>(a, b, c, accumulate);
  }
}

}  // namespace lt::ops::cpu
