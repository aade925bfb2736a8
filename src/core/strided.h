#pragma once
// Walks the elements of N same-shaped strided views in logical (row-major)
// order. The innermost dimension is handed to the callback as a run, so
// kernels loop over it tightly.
#include <array>
#include <cstdint>

#include "core/shape.h"

namespace lt {

template <size_t N>
struct StridedOperands {
  std::array<const int64_t*, N> strides;  // each of rank shape.size()
  std::array<int64_t, N> offsets;         // elements
};

// fn(offsets, inner_size, inner_strides) once per run of the innermost dim.
template <size_t N, typename Fn>
void for_each_run(const Shape& shape, const StridedOperands<N>& ops, Fn&& fn) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (numel(shape) == 0) return;
  std::array<int64_t, N> off = ops.offsets;
  std::array<int64_t, N> inner_strides{};
  if (rank == 0) {
    inner_strides.fill(1);
    fn(off, int64_t{1}, inner_strides);
    return;
  }
  for (size_t k = 0; k < N; ++k) inner_strides[k] = ops.strides[k][rank - 1];
  const int64_t inner = shape[rank - 1];
  Shape index(static_cast<size_t>(rank - 1), 0);
  while (true) {
    fn(off, inner, inner_strides);
    int64_t d = rank - 2;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += ops.strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= ops.strides[k][d] * (shape[d] - 1);
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace lt
