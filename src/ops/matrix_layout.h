#pragma once
// How a GEMM library reaches the logical [rows, cols] matrix held in a
// tensor's last two dims: either as a stored row-major matrix with leading
// dimension `ld`, or as the transpose of one (`transposed`), which the
// library reads through its transpose flag. Shared by the OpenBLAS
// (ops/cpu/gemm.cpp) and cuBLASLt (ops/cuda/gemm.cu) paths.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace lt::ops {

// One logical [rows, cols] matrix of a tensor (its last two dims), strides
// in elements.
struct MatrixView {
  int64_t rows, cols, row_stride, col_stride;
};

inline MatrixView matrix_view(const Tensor& t) {
  const int64_t n = t.dim();
  return {t.size(n - 2), t.size(n - 1), t.stride(n - 2), t.stride(n - 1)};
}

struct MatrixAddressing {
  bool transposed = false;  // stored as the row-major transpose (column-major)
  int64_t ld = 1;
};

// nullopt when neither layout reaches the view (it must be copied first).
// A dim of size 1 is never stepped along, so its stride is free and we pick
// the one the library accepts: ld >= max(1, stored row length).
inline std::optional<MatrixAddressing> matrix_addressing(const MatrixView& m) {
  const int64_t min_ld = std::max<int64_t>(m.cols, 1);
  if (m.cols <= 1 || m.col_stride == 1) {
    const int64_t ld = m.rows <= 1 ? min_ld : m.row_stride;
    if (ld >= min_ld) return MatrixAddressing{false, ld};
  }
  const int64_t min_ld_t = std::max<int64_t>(m.rows, 1);
  if (m.rows <= 1 || m.row_stride == 1) {
    const int64_t ld = m.cols <= 1 ? min_ld_t : m.col_stride;
    if (ld >= min_ld_t) return MatrixAddressing{true, ld};
  }
  return std::nullopt;
}

// [..., R, C] as one [batch * R, C] matrix without copying, when the batch
// dims step through memory evenly in units of R rows (a contiguous tensor,
// or a row slice of one). Size-1 dims never move, so they always merge.
inline std::optional<Tensor> merge_batch_into_rows(const Tensor& t) {
  const int64_t n = t.dim();
  int64_t rows = 1, row_stride = 0;
  for (int64_t d = n - 2; d >= 0; --d) {
    const int64_t size = t.size(d);
    if (size == 1) continue;
    if (rows == 1) {
      rows = size;
      row_stride = t.stride(d);
    } else if (t.stride(d) == row_stride * rows) {
      rows *= size;
    } else {
      return std::nullopt;
    }
  }
  if (rows == 1) row_stride = std::max<int64_t>(t.size(n - 1), 1);
  return Tensor::from_storage(t.storage(), t.offset(), {rows, t.size(n - 1)},
                              {row_stride, t.stride(n - 1)}, t.dtype());
}

}  // namespace lt::ops
