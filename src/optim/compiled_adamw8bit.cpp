#include "optim/compiled_adamw8bit.h"

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

// code[rank] for ranks in [lo, hi): a balanced tree of selects, exact.
Value lookup(KernelGraph& k, Value rank, const Code8& code, int lo, int hi) {
  if (hi - lo == 1) return k.constant(code[static_cast<size_t>(lo)]);
  const int mid = (lo + hi) / 2;
  return k.select(k.less(rank, k.constant(mid)), lookup(k, rank, code, lo, mid),
                  lookup(k, rank, code, mid, hi));
}

// One of `table`'s eight per-segment values for the segment of |y| (the
// number of decade thresholds above |y|), as segment_rank picks it.
template <typename T>
Value per_segment(KernelGraph& k, Value magnitude, const Code8Segments& s,
                  const std::array<T, 16>& table, int side) {
  Value v = k.constant(static_cast<double>(table[static_cast<size_t>(8 * side + 7)]));
  for (int e = 6; e >= 0; --e) {
    v = k.select(k.less(magnitude, k.constant(s.decade[static_cast<size_t>(e)])), v,
                 k.constant(static_cast<double>(table[static_cast<size_t>(8 * side + e)])));
  }
  return v;
}

// The rank segment_rank gives y's code (y = x / absmax), as an f32 value;
// negative y only for a signed code.
Value quantize(KernelGraph& k, Value y, const Code8& code, bool is_signed) {
  const Code8Segments& s = segments_of(code);
  const Value magnitude = k.abs(y);
  const Value round = k.constant(kRoundToInteger);
  auto side_rank = [&](int side) {
    const Value low = per_segment(k, magnitude, s, s.low, side);
    const Value inv_step = per_segment(k, magnitude, s, s.inv_step, side);
    const Value base = per_segment(k, magnitude, s, s.base, side);
    const Value j = k.mul(k.sub(magnitude, low), inv_step);
    const Value nearest = k.sub(k.add(j, round), round);
    return side == 1 ? k.sub(base, nearest) : k.add(base, nearest);
  };
  Value rank = side_rank(0);
  if (is_signed) rank = k.select(k.less(y, k.constant(0.0)), side_rank(1), rank);
  // Within [0, 255] whatever the input (a NaN stays NaN).
  const Value clamped_low = k.max(rank, k.constant(0.0));
  return k.neg(k.max(k.neg(clamped_low), k.constant(-255.0)));
}

// quantize_block's codes for x with its block's absmax: x * (1 / absmax)
// (x / absmax when that is not finite), all ranks of 0 when absmax is 0.
Value quantize_with_absmax(KernelGraph& k, Value x, Value absmax, const Code8& code,
                           bool is_signed) {
  const Value inverse = k.div(k.constant(1.0), absmax);
  const Value finite = k.less(inverse, k.constant(std::numeric_limits<float>::infinity()));
  const Value y = k.select(finite, k.mul(x, inverse), k.div(x, absmax));
  const Value zero_rank = k.constant(quantize_nearest(code, 0.0f));
  return k.select(k.less(k.constant(0.0), absmax), quantize(k, y, code, is_signed), zero_rank);
}

void check_tensor(const Tensor& t, DType dtype, int64_t numel, Device device, const char* what) {
  LT_CHECK(t.dtype() == dtype && t.numel() == numel && t.is_contiguous() && t.device() == device,
           "compiled_adamw8bit_update: ", what, " must be a contiguous ", dtype_name(dtype),
           " tensor of ", numel, " elements on ", device.str(), ", got ", t.str());
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
  const Value m = k.mul(lookup(k, m_codes, signed_code(), 0, 256), m_scale);
  const Value sqrt_v = k.mul(lookup(k, sqrt_v_codes, unsigned_code(), 0, 256), sqrt_v_scale);
  const AdamWStepValues next = adamw_step(k, scalars, p, grad, m, k.mul(sqrt_v, sqrt_v));
  const Value m_absmax = k.row_max(k.abs(next.m));
  const Value sqrt_v_absmax = k.row_max(k.abs(next.sqrt_v));
  k.output(next.p, DType::F32);
  k.output(quantize_with_absmax(k, next.m, m_absmax, signed_code(), true), DType::U8);
  k.output(quantize_with_absmax(k, next.sqrt_v, sqrt_v_absmax, unsigned_code(), false), DType::U8);
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
  LT_CHECK(block_size > 0, "compiled_adamw8bit_update: block_size must be positive, got ",
           block_size);
  const int64_t n = grad.numel();
  const int64_t blocks = (n + block_size - 1) / block_size;
  const Device device = grad.device();
  check_tensor(param, DType::F32, n, device, "param");
  check_tensor(m_codes, DType::U8, n, device, "the codes of m");
  check_tensor(sqrt_v_codes, DType::U8, n, device, "the codes of sqrt(v)");
  check_tensor(m_scales, DType::F32, blocks, device, "the scales of m");
  check_tensor(sqrt_v_scales, DType::F32, blocks, device, "the scales of sqrt(v)");
  if (bf16_copy.defined()) check_tensor(bf16_copy, DType::BF16, n, device, "the bf16 copy");
  const KernelGraph graph = adamw8bit_kernel_graph(grad.dtype(), bf16_copy.defined());
  const compile::DeviceKernel kernel = compile::kernel_for(cache, graph, device);
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
    for (Tensor& t : adamw_scalar_rows(s, rows)) inputs.push_back(t.to(device));
    // The outputs are new buffers, copied back (no in-place outputs in the IR).
    const std::vector<Tensor> out = compile::call(kernel, graph, inputs);
    slice(param).copy_(out[0].reshape({count}));
    slice(m_codes).copy_(out[1].reshape({count}));
    slice(sqrt_v_codes).copy_(out[2].reshape({count}));
    m_scales.slice(0, first, first + rows).copy_(out[3]);
    sqrt_v_scales.slice(0, first, first + rows).copy_(out[4]);
    if (bf16_copy.defined()) slice(bf16_copy).copy_(out[5].reshape({count}));
    first += rows;
  }
}

}  // namespace lt::optim
