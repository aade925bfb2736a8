// Host side of the CUDA attention: dense inputs, output allocation, and the
// choice between the flash kernels and the row kernels (attention.h).
#include "ops/cuda/attention.h"
#include "ops/cuda/attention_kernels.cuh"

namespace lt::ops::cuda {

namespace {

attn::Shape4 shape_of(const Tensor& q, const Tensor& k, const char* op) {
  for (int d = 0; d < 4; ++d) {
    LT_CHECK(q.size(d) <= 0x7fffffff, op, ": dimension ", d, " of q ", q.str(), " is too large");
  }
  const attn::Shape4 s{static_cast<int>(q.size(0)), static_cast<int>(q.size(1)),
                       static_cast<int>(q.size(2)), static_cast<int>(k.size(2)),
                       static_cast<int>(q.size(3))};
  LT_CHECK(s.head_dim > 0, op, ": head_dim must be positive on CUDA, got ", q.str());
  return s;
}

// The flash kernels need bf16, head_dim 64 or 128 and 16-byte aligned rows;
// the others need head_dim <= kRowsMaxHeadDim.
bool use_flash(const Tensor& q, const attn::Shape4& s, std::initializer_list<const void*> ptrs,
               const char* op) {
  const bool flash = q.dtype() == DType::BF16 && attn::flash_supported(s) && all_aligned16(ptrs);
  LT_CHECK(flash || s.head_dim <= attn::kRowsMaxHeadDim, op, ": head_dim ", s.head_dim,
           " is not supported on CUDA (bf16 with 64 or 128, or any dtype up to ",
           attn::kRowsMaxHeadDim, ")");
  return flash;
}

Tensor as_dtype(const Tensor& t, DType dtype) {
  return dense(t.dtype() == dtype ? t : t.to(dtype));
}

}  // namespace

AttentionForward causal_attention_forward(const Tensor& q_in, const Tensor& k_in,
                                          const Tensor& v_in, double scale) {
  const char* op = "causal_attention_forward";
  check_kernel_dtype(q_in, op);
  const Tensor q = dense(q_in), k = dense(k_in), v = dense(v_in);
  const attn::Shape4 s = shape_of(q, k, op);
  AttentionForward r{Tensor::empty(q.shape(), q.dtype(), q.device()),
                     Tensor::empty({s.batch, s.q_heads, s.seq}, DType::F32, q.device())};
  if (q.numel() == 0) return r;
  ::lt::cuda::DeviceGuard guard(q.device().index);
  const cudaStream_t stream = stream_for(q.device());
  const attn::ForwardArgs a{s,
                            q.data_ptr(),
                            k.data_ptr(),
                            v.data_ptr(),
                            r.out.data_ptr(),
                            static_cast<float*>(r.lse.data_ptr()),
                            static_cast<float>(scale)};
  if (use_flash(q, s, {a.q, a.k, a.v, a.out}, op)) {
    attn::launch_flash_forward(a, stream);
  } else {
    dispatch_kernel_dtype(q.dtype(),
                          [&](auto tag) { attn::launch_rows_forward<decltype(tag)>(a, stream); });
  }
  return r;
}

AttentionGrads causal_attention_backward(const Tensor& dout_in, const Tensor& q_in,
                                         const Tensor& k_in, const Tensor& v_in,
                                         const Tensor& out_in, const Tensor& lse_in, double scale) {
  const char* op = "causal_attention_backward";
  check_kernel_dtype(q_in, op);
  const Tensor q = dense(q_in), k = dense(k_in), v = dense(v_in);
  // dout may come in another floating type (an f32 gradient of a bf16
  // output); everything meets in q's dtype, and lse in f32.
  const Tensor dout = as_dtype(dout_in, q.dtype()), out = as_dtype(out_in, q.dtype());
  const Tensor lse = as_dtype(lse_in, DType::F32);
  const attn::Shape4 s = shape_of(q, k, op);
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype(), q.device()),
                   Tensor::empty(k.shape(), k.dtype(), k.device()),
                   Tensor::empty(v.shape(), v.dtype(), v.device())};
  if (q.numel() == 0) return g;
  ::lt::cuda::DeviceGuard guard(q.device().index);
  const cudaStream_t stream = stream_for(q.device());
  const Tensor delta = Tensor::empty({s.batch, s.q_heads, s.seq}, DType::F32, q.device());
  attn::BackwardArgs a{s,
                       q.data_ptr(),
                       k.data_ptr(),
                       v.data_ptr(),
                       dout.data_ptr(),
                       static_cast<const float*>(lse.data_ptr()),
                       static_cast<const float*>(delta.data_ptr()),
                       nullptr,
                       g.dq.data_ptr(),
                       g.dk.data_ptr(),
                       g.dv.data_ptr(),
                       static_cast<float>(scale)};
  const bool flash = use_flash(q, s, {a.q, a.k, a.v, a.dout, a.dk, a.dv}, op);
  dispatch_kernel_dtype(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    attn::launch_delta<T>(s, static_cast<const T*>(dout.data_ptr()),
                          static_cast<const T*>(out.data_ptr()),
                          static_cast<float*>(delta.data_ptr()), stream);
  });
  if (!flash) {
    dispatch_kernel_dtype(q.dtype(),
                          [&](auto tag) { attn::launch_rows_backward<decltype(tag)>(a, stream); });
    return g;
  }
  const Tensor dq_accum = Tensor::empty(q.shape(), DType::F32, q.device());
  LT_CUDA_CHECK(cudaMemsetAsync(dq_accum.data_ptr(), 0, dq_accum.numel() * sizeof(float), stream));
  a.dq_accum = static_cast<float*>(dq_accum.data_ptr());
  attn::launch_flash_backward(a, stream);
  attn::launch_dq_cast(a.dq_accum, static_cast<bf16*>(g.dq.data_ptr()), dq_accum.numel(),
                       static_cast<float>(scale), stream);
  return g;
}

}  // namespace lt::ops::cuda
