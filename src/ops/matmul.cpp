#include "ops/matmul.h"

#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cpu/gemm.h"
#include "ops/cuda/gemm.h"

namespace lt::ops {

namespace {

using cpu::transpose_last;

// `t` detached and in compute dtype `ct`. Without a conversion the strides
// are kept: BLAS reads transposed views in place, so copying would be waste.
Tensor widen(const Tensor& t, DType ct) {
  return t.dtype() == ct ? t.detach() : t.detach().to(ct);
}

Tensor op_view(const Tensor& t, bool transposed) {
  return transposed ? transpose_last(t) : t;
}

Shape batch_dims(const Tensor& t) {
  return Shape(t.shape().begin(), t.shape().end() - 2);
}

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// Vectors [n] act as one-row matrices [1, n] (linear accepts x: [in]).
Tensor as_rows(const Tensor& t) {
  return t.dim() == 1 ? t.unsqueeze(0) : t;
}

void check_device(Device device, const char* op) {
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) return;
#endif
  if (!device.is_cpu()) no_kernel(op, device);
}

// The dtype the product computes in on `device`. The CPU widens bf16/f16 to
// f32 (BLAS has no 16-bit GEMM); cuBLASLt takes every floating dtype as it
// is and accumulates in f32 (ops/cuda/gemm.h), so nothing is converted.
DType kernel_dtype(Device device, DType t) {
  return device.is_cuda() ? t : compute_dtype(t);
}

// c = a @ b (+ bias) or c += a @ b, on the backend of `device` (see
// cpu::gemm for the forms). The CPU takes no bias here: linear writes it
// into c and accumulates, which is what the GPU does when no epilogue fits.
void gemm_on(Device device, const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate,
             const Tensor& bias = Tensor()) {
  if (device.is_cuda()) {
#ifdef LT_WITH_CUDA
    cuda::gemm(a, b, c, accumulate, bias);
    return;
#endif
  }
  LT_CHECK(!bias.defined(), "gemm_on: the CPU gemm takes no bias");
  cpu::gemm(a, b, c, accumulate);
}

// op(b) fits op(a) of `a_batch` batch dims and inner size `k`.
void check_b_fits(const char* op, const Shape& a_batch, int64_t k, const Tensor& ob) {
  LT_CHECK(ob.size(-2) == k, op, ": inner sizes differ (", k, " vs ", ob.size(-2), ")");
  LT_CHECK(ob.dim() == 2 || batch_dims(ob) == a_batch, op, ": b must be [K, N] or carry a's batch ",
           shape_str(a_batch), ", got ", shape_str(batch_dims(ob)));
}

// Sums the rows of a contiguous [rows, cols] matrix, in double. Each task
// owns a slice of columns and walks every row through it, so reads stay
// contiguous within the slice.
template <typename T>
void sum_rows(const T* x, int64_t rows, int64_t cols, T* out) {
  const int64_t grain = std::max<int64_t>(16, (1 << 15) / std::max<int64_t>(rows, 1));
  parallel_for(0, cols, grain, [&](int64_t lo, int64_t hi) {
    std::vector<double> acc(static_cast<size_t>(hi - lo), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * cols;
      for (int64_t c = lo; c < hi; ++c) acc[c - lo] += row[c];
    }
    for (int64_t c = lo; c < hi; ++c) out[c] = static_cast<T>(acc[c - lo]);
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const Device device = common_device({&a, &b}, "matmul");
  check_floating(a, "matmul");
  LT_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ (", dtype_name(a.dtype()), " and ",
           dtype_name(b.dtype()), ")");
  LT_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: operands need rank >= 2, got ", a.str(), " and ",
           b.str());
  check_device(device, "matmul");
  const DType ct = kernel_dtype(device, a.dtype());
  const Tensor oa = op_view(a.detach(), trans_a), ob = op_view(b.detach(), trans_b);
  check_b_fits("matmul", batch_dims(oa), oa.size(-1), ob);
  Tensor out = Tensor::empty(with_matrix(batch_dims(oa), oa.size(-2), ob.size(-1)), ct, device);
  gemm_on(device, op_view(widen(a, ct), trans_a), op_view(widen(b, ct), trans_b), out, false);
  return out.to(a.dtype());
}

Tensor matmul_backward_a(const Tensor& grad_out, const Tensor& b, bool trans_a, bool trans_b) {
  const Device device = common_device({&grad_out, &b}, "matmul_backward_a");
  check_device(device, "matmul_backward_a");
  const DType ct = kernel_dtype(device, b.dtype());
  const Tensor g = widen(grad_out, ct), ob = op_view(widen(b, ct), trans_b);
  LT_CHECK(g.dim() >= 2 && g.size(-1) == ob.size(-1), "matmul_backward_a: gradient ",
           grad_out.str(), " does not fit b ", b.str());
  check_b_fits("matmul_backward_a", batch_dims(g), ob.size(-2), ob);
  // d op(a) = g op(b)^T, written through op's view of a's gradient.
  const int64_t m = g.size(-2), k = ob.size(-2);
  Tensor ga = Tensor::empty(
      trans_a ? with_matrix(batch_dims(g), k, m) : with_matrix(batch_dims(g), m, k), ct, device);
  gemm_on(device, g, transpose_last(ob), op_view(ga, trans_a), false);
  return ga.to(b.dtype());
}

Tensor matmul_backward_b(const Tensor& grad_out, const Tensor& a, bool trans_a, bool trans_b,
                         bool b_shared) {
  const Device device = common_device({&grad_out, &a}, "matmul_backward_b");
  check_device(device, "matmul_backward_b");
  const DType ct = kernel_dtype(device, a.dtype());
  const Tensor g = widen(grad_out, ct), oa = op_view(widen(a, ct), trans_a);
  LT_CHECK(g.dim() == oa.dim() && batch_dims(g) == batch_dims(oa) && g.size(-2) == oa.size(-2),
           "matmul_backward_b: gradient ", grad_out.str(), " does not fit a ", a.str());
  // d op(b) = op(a)^T g, summed over the batch when b was shared.
  const int64_t k = oa.size(-1), n = g.size(-1);
  const Shape batch = b_shared ? Shape{} : batch_dims(g);
  Tensor gb =
      Tensor::empty(trans_b ? with_matrix(batch, n, k) : with_matrix(batch, k, n), ct, device);
  gemm_on(device, transpose_last(oa), g, op_view(gb, trans_b), false);
  return gb.to(a.dtype());
}

MatmulGrads matmul_backward(const Tensor& grad_out, const Tensor& a, const Tensor& b, bool trans_a,
                            bool trans_b, bool need_a, bool need_b) {
  MatmulGrads grads;
  if (need_a) grads.a = matmul_backward_a(grad_out, b, trans_a, trans_b);
  if (need_b) grads.b = matmul_backward_b(grad_out, a, trans_a, trans_b, b.dim() == 2);
  return grads;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const Device device = common_device({&x, &weight, &bias}, "linear");
  check_floating(x, "linear");
  LT_CHECK(x.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x.dtype()),
           "linear: x, weight and bias must share a dtype, got ", x.str(), ", ", weight.str(),
           bias.defined() ? ", " + bias.str() : std::string());
  LT_CHECK(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1), "linear: x ", x.str(),
           " does not fit weight ", weight.str(), " ([out, in])");
  LT_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), "linear: bias ",
           bias.defined() ? bias.str() : std::string(), " does not fit weight ", weight.str());
  check_device(device, "linear");
  const DType ct = kernel_dtype(device, x.dtype());
  Shape out_shape = x.shape();
  out_shape.back() = weight.size(0);
  Tensor out = Tensor::empty(out_shape, ct, device);
  const Tensor out_rows = as_rows(out);
  const Tensor xr = as_rows(widen(x, ct)), wt = transpose_last(widen(weight, ct));
  if (device.is_cuda()) {
    // cuBLASLt adds the bias in the GEMM's epilogue.
    gemm_on(device, xr, wt, out_rows, false, bias.defined() ? widen(bias, ct) : Tensor());
  } else {
    // With a bias the output starts as the bias in every row and BLAS adds
    // the product to it (beta = 1): no second pass over the output.
    if (bias.defined()) out_rows.copy_(widen(bias, ct));
    gemm_on(device, xr, wt, out_rows, bias.defined());
  }
  return out.to(x.dtype());
}

LinearGrads linear_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                            bool need_x, bool need_weight, bool need_bias,
                            const Tensor& weight_sum) {
  const Device device = common_device({&grad_out, &x, &weight}, "linear_backward");
  check_device(device, "linear_backward");
  LT_CHECK(grad_out.dim() >= 1, "linear_backward: gradient ", grad_out.str(), " has no out dim");
  const DType param_dtype = x.defined()        ? x.dtype()
                            : weight.defined() ? weight.dtype()
                                               : grad_out.dtype();
  const DType ct = kernel_dtype(device, param_dtype);
  const Tensor g = as_rows(widen(grad_out, ct));  // [..., out]
  LinearGrads grads;
  if (need_x) {
    LT_CHECK(weight.defined(), "linear_backward: the x gradient needs the weight");
    LT_CHECK(weight.dim() == 2 && weight.size(0) == g.size(-1), "linear_backward: gradient ",
             grad_out.str(), " does not fit weight ", weight.str());
    Shape x_shape = grad_out.shape();
    x_shape.back() = weight.size(1);
    Tensor gx = Tensor::empty(x_shape, ct, device);
    gemm_on(device, g, widen(weight, ct), as_rows(gx), false);  // dx = g W
    grads.x = gx.to(weight.dtype());
  }
  if (need_weight) {
    LT_CHECK(x.defined(), "linear_backward: the weight gradient needs x");
    const Shape shape{g.size(-1), x.size(-1)};
    const bool into_sum = weight_sum.defined() && weight_sum.dtype() == ct &&
                          weight_sum.dtype() == x.dtype() && weight_sum.shape() == shape &&
                          weight_sum.is_contiguous() && weight_sum.device() == device;
    grads.weight = into_sum ? linear_weight_grad_sum(g, x, weight_sum)
                            : linear_weight_grad_sum(g, x, Tensor()).to(x.dtype());
  }
  if (need_bias && device.is_cuda()) {
    // The column sums of g as one more product, g^T @ ones: cuBLASLt reads
    // g once, accumulates in f32 and rounds once, as the CPU sum does.
    const int64_t cols = g.size(-1), rows = cols == 0 ? 0 : g.numel() / cols;
    const Tensor g2 = g.reshape({rows, cols});
    Tensor gbias = Tensor::empty({cols, 1}, ct, device);
    gemm_on(device, transpose_last(g2), Tensor::full({rows, 1}, 1.0, ct, device), gbias, false);
    grads.bias = gbias.view({cols}).to(param_dtype);
  } else if (need_bias) {
    const Tensor gc = g.contiguous();
    const int64_t cols = gc.size(-1), rows = cols == 0 ? 0 : gc.numel() / cols;
    Tensor gbias = Tensor::empty({cols}, ct);
    dispatch_floating(ct, [&](auto tag) {
      using T = decltype(tag);
      sum_rows<T>(gc.data<T>(), rows, cols, gbias.data<T>());
    });
    grads.bias = gbias.to(param_dtype);
  }
  return grads;
}

Tensor linear_weight_grad_sum(const Tensor& grad_out, const Tensor& x, Tensor sum) {
  const Device device = common_device({&grad_out, &x, &sum}, "linear_weight_grad_sum");
  check_device(device, "linear_weight_grad_sum");
  const DType ct = kernel_dtype(device, x.dtype());
  const Tensor g = as_rows(widen(grad_out, ct)), xr = as_rows(widen(x, ct));
  LT_CHECK(batch_dims(xr) == batch_dims(g) && xr.size(-2) == g.size(-2),
           "linear_weight_grad_sum: gradient ", grad_out.str(), " does not fit x ", x.str());
  // dW = sum over rows of g^T x; gemm sums the batch into the 2D output.
  const Shape shape{g.size(-1), xr.size(-1)};
  const bool accumulate = sum.defined();
  if (accumulate) {
    LT_CHECK(sum.shape() == shape && sum.dtype() == ct && sum.is_contiguous(),
             "linear_weight_grad_sum: the running sum ", sum.str(), " must be a contiguous ",
             dtype_name(ct), " ", shape_str(shape));
  } else {
    sum = Tensor::empty(shape, ct, device);
  }
  gemm_on(device, transpose_last(g), xr, sum, accumulate);
  return sum;
}

}  // namespace lt::ops
