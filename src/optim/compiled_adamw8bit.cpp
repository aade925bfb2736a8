#include "optim/compiled_adamw8bit.h"

#include <algorithm>
#include <array>
#include <limits>

#include "compile/gpu_kernel.h"
#include "core/error.h"
#include "optim/adamw8bit_kernel.h"
#include "optim/compiled_adamw.h"

namespace lt::optim {

using compile::KernelGraph;
using compile::ShapeClass;
using compile::Value;

namespace {

// The rank quantize_nearest_fast's position gives y (without its near-tie
// fallback), in its f32 operations: the segment of |y| is the number of
// decade thresholds above it, the side y's sign; the rank is then
// base +- rint((|y| - low) * inv_step), the three looked up by segment and
// side. quantize_nearest's rank, or at a near-tie its neighbour (NaN for a
// NaN y, or a negative one with the unsigned code).
Value estimated_rank(KernelGraph& k, Value y, const Code8& code) {
  const Code8Segments& s = segments_of(code);
  const Value magnitude = k.abs(y);
  Value segment = k.less(magnitude, k.constant(s.decade[0]));
  for (size_t e = 1; e < s.decade.size(); ++e) {
    segment = k.add(segment, k.less(magnitude, k.constant(s.decade[e])));
  }
  const Value negative = k.less(y, k.constant(0.0));
  const Value at = k.add(segment, k.mul(negative, k.constant(8.0)));
  std::array<float, 16> base{};
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<float>(s.base[i]);
  const Value j = k.mul(k.sub(magnitude, k.lookup(s.low, at)), k.lookup(s.inv_step, at));
  const Value round = k.constant(kRoundToInteger);
  const Value nearest = k.sub(k.add(j, round), round);
  // Ranks fall as negative magnitudes grow: base - nearest there.
  const Value direction = k.sub(k.constant(1.0), k.mul(negative, k.constant(2.0)));
  return k.add(k.lookup(base, at), k.mul(direction, nearest));
}

// quantize_nearest(code, y) as an f32 value, from a rank r within one of
// it: the two codes around y are r - 1 and r, or r and r + 1 (lookups clamp
// at the table's ends), and the nearer wins, a tie to the smaller
// magnitude, in quantize_nearest's f32 operations. So every code, near-ties
// and NaN (rank 0) included, is quantize_nearest's, as optim's kernels'.
Value quantize(KernelGraph& k, Value y, const Code8& code) {
  const Value one = k.constant(1.0), zero = k.constant(0.0);
  const Value r = estimated_rank(k, y, code);
  const Value at_r = k.lookup(code, r);
  const Value above = k.less(at_r, y);  // y is past code[r]: between r and r + 1
  const Value lower_rank = k.add(k.sub(r, one), above);
  const Value lower = k.select(above, at_r, k.lookup(code, k.sub(r, one)));
  const Value upper = k.select(above, k.lookup(code, k.add(r, one)), at_r);
  const Value to_lower = k.sub(y, lower), to_upper = k.sub(upper, y);
  const Value tie_to_lower = k.sub(one, k.less(k.abs(upper), k.abs(lower)));
  const Value take_lower = k.select(k.less(to_lower, to_upper), one,
                                    k.select(k.less(to_upper, to_lower), zero, tie_to_lower));
  const Value rank = k.sub(k.add(lower_rank, one), take_lower);
  // Into [0, 255] by ordered compares, so that a NaN rank is 0.
  const Value low_clamped = k.select(k.less(zero, rank), rank, zero);
  const Value top = k.constant(255.0);
  return k.select(k.less(low_clamped, top), low_clamped, top);
}

// quantize_block's codes for x with its block's absmax: x * (1 / absmax)
// (x / absmax when that is not finite), all ranks of 0 when absmax is 0.
Value quantize_with_absmax(KernelGraph& k, Value x, Value absmax, const Code8& code) {
  const Value inverse = k.div(k.constant(1.0), absmax);
  const Value finite = k.less(inverse, k.constant(std::numeric_limits<float>::infinity()));
  const Value y = k.select(finite, k.mul(x, inverse), k.div(x, absmax));
  const Value zero_rank = k.constant(quantize_nearest(code, 0.0f));
  return k.select(k.less(k.constant(0.0), absmax), quantize(k, y, code), zero_rank);
}

void check_tensor(const Tensor& t, DType dtype, int64_t numel, Device device, const char* what) {
  LT_CHECK(t.dtype() == dtype && t.numel() == numel && t.is_contiguous() && t.device() == device,
           "compiled_adamw8bit_update: ", what, " must be a contiguous ", dtype_name(dtype),
           " tensor of ", numel, " elements on ", device.str(), ", got ", t.str());
}

// The blocks of `n` elements (the last may be shorter).
int64_t block_count(int64_t n, int64_t block_size) {
  LT_CHECK(block_size > 0, "compiled_adamw8bit_update: block_size must be positive, got ",
           block_size);
  return (n + block_size - 1) / block_size;
}

}  // namespace

KernelGraph adamw8bit_kernel_graph(DType grad_dtype, bool with_bf16_copy) {
  KernelGraph k;
  const Value p = k.input(ShapeClass::Full, DType::F32);
  const Value grad = k.input(ShapeClass::Full, grad_dtype);
  const Value m_codes = k.input(ShapeClass::Full, DType::U8);
  const Value sqrt_v_codes = k.input(ShapeClass::Full, DType::U8);
  const Value m_scale = k.input(ShapeClass::Row, DType::F32);
  const Value sqrt_v_scale = k.input(ShapeClass::Row, DType::F32);
  const AdamWScalarValues scalars = adamw_scalar_inputs(k);
  // dequantize_block, then detail::update_from_sqrt_v.
  const Value m = k.mul(k.lookup(signed_code(), m_codes), m_scale);
  const Value sqrt_v = k.mul(k.lookup(unsigned_code(), sqrt_v_codes), sqrt_v_scale);
  const AdamWStepValues next = adamw_step(k, scalars, p, grad, m, k.mul(sqrt_v, sqrt_v));
  const Value m_absmax = k.row_max(k.abs(next.m));
  const Value sqrt_v_absmax = k.row_max(k.abs(next.sqrt_v));
  // p and the codes in place (KernelGraph::output_over); the scales, row
  // values, are new buffers copied back.
  k.output_over(next.p, p);
  k.output_over(quantize_with_absmax(k, next.m, m_absmax, signed_code()), m_codes);
  k.output_over(quantize_with_absmax(k, next.sqrt_v, sqrt_v_absmax, unsigned_code()), sqrt_v_codes);
  k.output(m_absmax, DType::F32);
  k.output(sqrt_v_absmax, DType::F32);
  if (with_bf16_copy) k.output(next.p, DType::BF16);
  return k;
}

void compiled_adamw8bit_update(compile::KernelCache& cache, const AdamWScalars& s,
                               int64_t block_size, const Tensor& param, const Tensor& grad,
                               const Tensor& m_codes, const Tensor& m_scales,
                               const Tensor& sqrt_v_codes, const Tensor& sqrt_v_scales,
                               const Tensor& bf16_copy) {
  const int64_t blocks = block_count(grad.numel(), block_size);
  CompiledUpdateKernel kernel;
  kernel.graph = adamw8bit_kernel_graph(grad.dtype(), bf16_copy.defined());
  kernel.kernel = compile::kernel_for(cache, kernel.graph, grad.device());
  compiled_adamw8bit_update(
      kernel, adamw_scalar_table(s, std::max<int64_t>(1, blocks)).to(grad.device()), block_size,
      param, grad, m_codes, m_scales, sqrt_v_codes, sqrt_v_scales, bf16_copy);
}

void compiled_adamw8bit_update(const CompiledUpdateKernel& kernel, const Tensor& scalar_table,
                               int64_t block_size, const Tensor& param, const Tensor& grad,
                               const Tensor& m_codes, const Tensor& m_scales,
                               const Tensor& sqrt_v_codes, const Tensor& sqrt_v_scales,
                               const Tensor& bf16_copy) {
  const int64_t n = grad.numel();
  const int64_t blocks = block_count(n, block_size);
  const Device device = grad.device();
  LT_CHECK(kernel.kernel.device == device, "compiled_adamw8bit_update: the kernel is for ",
           kernel.kernel.device.str(), ", the gradient on ", device.str());
  check_tensor(param, DType::F32, n, device, "param");
  check_tensor(m_codes, DType::U8, n, device, "the codes of m");
  check_tensor(sqrt_v_codes, DType::U8, n, device, "the codes of sqrt(v)");
  check_tensor(m_scales, DType::F32, blocks, device, "the scales of m");
  check_tensor(sqrt_v_scales, DType::F32, blocks, device, "the scales of sqrt(v)");
  if (bf16_copy.defined()) check_tensor(bf16_copy, DType::BF16, n, device, "the bf16 copy");
  const Tensor g = grad.contiguous().reshape({n});
  // The full blocks as one [blocks, block_size] call, the last one alone.
  const int64_t full = n / block_size;
  for (int64_t first = 0; first < blocks;) {
    const int64_t rows = first < full ? full : 1;
    const int64_t cols = first < full ? block_size : n - full * block_size;
    const int64_t at = first * block_size, count = rows * cols;
    auto slice = [&](const Tensor& t) { return t.reshape({n}).slice(0, at, at + count); };
    const Shape full_shape{rows, cols};
    std::vector<Tensor> inputs{
        slice(param).reshape(full_shape),       slice(g).reshape(full_shape),
        slice(m_codes).reshape(full_shape),     slice(sqrt_v_codes).reshape(full_shape),
        m_scales.slice(0, first, first + rows), sqrt_v_scales.slice(0, first, first + rows)};
    append_scalar_rows(scalar_table, rows, inputs);
    // p and the codes are written in place (adamw8bit_kernel_graph), the
    // copy straight into it; the scales come back as new [rows] tensors.
    std::vector<Tensor> given(5);
    if (bf16_copy.defined()) given.push_back(slice(bf16_copy).reshape(full_shape));
    const std::vector<Tensor> out = compile::call(kernel.kernel, kernel.graph, inputs, given);
    m_scales.slice(0, first, first + rows).copy_(out[3]);
    sqrt_v_scales.slice(0, first, first + rows).copy_(out[4]);
    first += rows;
  }
}

}  // namespace lt::optim
