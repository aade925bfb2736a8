#pragma once
// Shapes and strides are counted in elements, outermost dimension first.
#include <cstdint>
#include <string>
#include <vector>

namespace lt {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
std::string shape_str(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
// Numpy broadcasting: align trailing dimensions; sizes must match or be 1.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Resolves a possibly negative dimension index against `rank`.
int64_t normalize_dim(int64_t dim, int64_t rank);

}  // namespace lt
