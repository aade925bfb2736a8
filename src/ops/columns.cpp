#include "ops/columns.h"

#include <cmath>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cuda/columns.h"

namespace lt::ops {

namespace {

// Rows per unit of parallel work: each row is a contiguous run of C elements.
constexpr int64_t kRowGrain = 16;

void check_matrix(const Tensor& m, const char* op) {
  LT_CHECK(m.dim() == 2, op, ": expects a matrix [R, C], got ", m.str());
  LT_CHECK(m.dtype() == DType::F32 || m.dtype() == DType::BF16, op,
           ": the matrix must be f32 or bf16, got ", m.str());
}

void check_cols(const Tensor& m, const Tensor& cols, const char* op) {
  LT_CHECK(cols.dim() == 1 && cols.dtype() == DType::I32 && cols.is_contiguous(), op,
           ": column indices must be a contiguous i32 vector, got ", cols.str());
  LT_CHECK(cols.device() == m.device(), op, ": column indices on ", cols.device().str(),
           ", the matrix on ", m.device().str());
  if (!cols.device().is_cpu()) return;
  const int32_t* c = cols.data<int32_t>();
  for (int64_t j = 0; j < cols.numel(); ++j) {
    LT_CHECK(c[j] >= 0 && c[j] < m.size(1), op, ": column index ", c[j], " (position ", j,
             ") is outside [0, ", m.size(1), ")");
  }
}

// Element access for f32 (float) and bf16 (its bits, uint16_t) storage.
inline float widen(float v) {
  return v;
}
inline float widen(uint16_t bits) {
  return bf16_to_f32(bits);
}
inline void narrow(float v, float* out) {
  *out = v;
}
inline void narrow(float v, uint16_t* out) {
  *out = f32_to_bf16(v);
}

// Calls fn(T*) with m's elements as float or bf16 bits.
template <typename Fn>
void with_elements(const Tensor& m, Fn&& fn) {
  if (m.dtype() == DType::BF16) {
    fn(static_cast<uint16_t*>(m.data_ptr()));
  } else {
    fn(static_cast<float*>(m.data_ptr()));
  }
}

}  // namespace

Tensor column_abs_sums(const Tensor& m) {
  check_matrix(m, "column_abs_sums");
#ifdef LT_WITH_CUDA
  if (m.device().is_cuda()) return cuda::column_abs_sums(m.contiguous());
#endif
  if (!m.device().is_cpu()) no_kernel("column_abs_sums", m.device());
  const Tensor x = m.contiguous();
  const int64_t rows = x.size(0), cols = x.size(1);
  Tensor out = Tensor::zeros({cols}, DType::F32, m.device());
  float* o = out.data<float>();
  // Threads own disjoint column ranges, so each column's sum runs over the
  // rows in order whatever the thread count.
  with_elements(x, [&](auto* e) {
    parallel_for(0, cols, 256, [&](int64_t c0, int64_t c1) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = c0; c < c1; ++c) o[c] += std::fabs(widen(e[r * cols + c]));
      }
    });
  });
  return out;
}

Tensor gather_columns(const Tensor& m, const Tensor& cols) {
  check_matrix(m, "gather_columns");
  check_cols(m, cols, "gather_columns");
#ifdef LT_WITH_CUDA
  if (m.device().is_cuda()) return cuda::gather_columns(m.contiguous(), cols);
#endif
  if (!m.device().is_cpu()) no_kernel("gather_columns", m.device());
  const Tensor x = m.contiguous();
  const int64_t rows = x.size(0), width = x.size(1), k = cols.numel();
  Tensor out = Tensor::empty({rows, k}, DType::F32, m.device());
  float* o = out.data<float>();
  const int32_t* c = cols.data<int32_t>();
  with_elements(x, [&](auto* e) {
    parallel_for(0, rows, kRowGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t j = 0; j < k; ++j) o[r * k + j] = widen(e[r * width + c[j]]);
      }
    });
  });
  return out;
}

void scatter_columns(const Tensor& dst, const Tensor& src, const Tensor& cols) {
  check_matrix(dst, "scatter_columns");
  check_cols(dst, cols, "scatter_columns");
  LT_CHECK(dst.is_contiguous(), "scatter_columns: the destination must be contiguous, got ",
           dst.str());
  LT_CHECK(src.dtype() == DType::F32 && src.dim() == 2 && src.size(0) == dst.size(0) &&
               src.size(1) == cols.numel() && src.device() == dst.device(),
           "scatter_columns: source must be f32 [", dst.size(0), ", ", cols.numel(), "] on ",
           dst.device().str(), ", got ", src.str());
#ifdef LT_WITH_CUDA
  if (dst.device().is_cuda()) return cuda::scatter_columns(dst, src.contiguous(), cols);
#endif
  if (!dst.device().is_cpu()) no_kernel("scatter_columns", dst.device());
  const Tensor s = src.contiguous();
  const int64_t rows = dst.size(0), width = dst.size(1), k = cols.numel();
  const float* v = s.data<float>();
  const int32_t* c = cols.data<int32_t>();
  with_elements(dst, [&](auto* e) {
    parallel_for(0, rows, kRowGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t j = 0; j < k; ++j) narrow(v[r * k + j], &e[r * width + c[j]]);
      }
    });
  });
}

void zero_columns(const Tensor& dst, const Tensor& cols) {
  check_matrix(dst, "zero_columns");
  check_cols(dst, cols, "zero_columns");
  LT_CHECK(dst.is_contiguous(), "zero_columns: the destination must be contiguous, got ",
           dst.str());
#ifdef LT_WITH_CUDA
  if (dst.device().is_cuda()) return cuda::zero_columns(dst, cols);
#endif
  if (!dst.device().is_cpu()) no_kernel("zero_columns", dst.device());
  const int64_t rows = dst.size(0), width = dst.size(1), k = cols.numel();
  const int32_t* c = cols.data<int32_t>();
  with_elements(dst, [&](auto* e) {
    parallel_for(0, rows, kRowGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t j = 0; j < k; ++j) narrow(0.0f, &e[r * width + c[j]]);
      }
    });
  });
}

}  // namespace lt::ops
