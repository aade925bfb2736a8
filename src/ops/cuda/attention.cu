// Host side of the CUDA attention: dense inputs, output allocation, and the
// choice between the flash kernels and the row kernels (attention.h).
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "ops/cuda/attention.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/attention_kernels.cuh"

namespace lt::ops::cuda {

namespace {

thread_local AttentionPath last_forward = AttentionPath::kNone;
thread_local AttentionPath last_backward = AttentionPath::kNone;

enum class Preference { kAuto, kOwn, kCudnn };

// LT_ATTENTION, read on every call so that one process (the benchmark) can
// time both paths.
Preference preference() {
  const char* env = std::getenv("LT_ATTENTION");
  if (env == nullptr || *env == '\0' || std::string(env) == "auto") return Preference::kAuto;
  const std::string v(env);
  if (v == "own") return Preference::kOwn;
  if (v == "cudnn") return Preference::kCudnn;
  fail("LT_ATTENTION must be auto, own or cudnn, got '", v, "'");
}

// Says once per distinct reason why cuDNN did not run (auto mode), or
// fails (cudnn mode).
void cudnn_refused(Preference pref, const char* op, const std::string& why) {
  LT_CHECK(pref != Preference::kCudnn, op, ": LT_ATTENTION=cudnn but cuDNN cannot run it: ", why);
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (said.insert(why).second) {
    std::fprintf(stderr, "lazytrain: %s uses its own flash kernels: %s\n", op, why.c_str());
  }
}

cudnn_attn::Problem problem_of(const attn::Shape4& s, double scale, Device device) {
  return {s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim, scale, device.index};
}

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
  if (!use_flash(q, s, {a.q, a.k, a.v, a.out}, op)) {
    dispatch_kernel_dtype(q.dtype(),
                          [&](auto tag) { attn::launch_rows_forward<decltype(tag)>(a, stream); });
    last_forward = AttentionPath::kRows;
    return r;
  }
  const Preference pref = preference();
  if (pref != Preference::kOwn) {
    const std::string why =
        cudnn_attn::forward(problem_of(s, scale, q.device()), a.q, a.k, a.v, a.out, a.lse, stream);
    if (why.empty()) {
      last_forward = AttentionPath::kCudnn;
      return r;
    }
    cudnn_refused(pref, op, why);
  }
  attn::launch_flash_forward(a, stream);
  last_forward = AttentionPath::kFlash;
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
  // cuDNN also reads out in place (the own kernels read it through delta).
  const Preference pref = flash && aligned16(out.data_ptr()) ? preference() : Preference::kOwn;
  if (pref != Preference::kOwn) {
    const std::string why =
        cudnn_attn::backward(problem_of(s, scale, q.device()), a.q, a.k, a.v, out.data_ptr(),
                             a.dout, a.lse, g.dq.data_ptr(), a.dk, a.dv, stream);
    if (why.empty()) {
      last_backward = AttentionPath::kCudnn;
      return g;
    }
    cudnn_refused(pref, op, why);
  }
  dispatch_kernel_dtype(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    attn::launch_delta<T>(s, static_cast<const T*>(dout.data_ptr()),
                          static_cast<const T*>(out.data_ptr()),
                          static_cast<float*>(delta.data_ptr()), stream);
  });
  if (!flash) {
    dispatch_kernel_dtype(q.dtype(),
                          [&](auto tag) { attn::launch_rows_backward<decltype(tag)>(a, stream); });
    last_backward = AttentionPath::kRows;
    return g;
  }
  const Tensor dq_accum = Tensor::empty(q.shape(), DType::F32, q.device());
  LT_CUDA_CHECK(cudaMemsetAsync(dq_accum.data_ptr(), 0, dq_accum.numel() * sizeof(float), stream));
  a.dq_accum = static_cast<float*>(dq_accum.data_ptr());
  attn::launch_flash_backward(a, stream);
  attn::launch_dq_cast(a.dq_accum, static_cast<bf16*>(g.dq.data_ptr()), dq_accum.numel(),
                       static_cast<float>(scale), stream);
  last_backward = AttentionPath::kFlash;
  return g;
}

AttentionPath last_forward_path() {
  return last_forward;
}

AttentionPath last_backward_path() {
  return last_backward;
}

}  // namespace lt::ops::cuda
