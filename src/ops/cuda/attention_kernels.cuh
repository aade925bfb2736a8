#pragma once
// The launchers shared by the attention translation units (attention.cu
// calls them; each .cu defines its own). Pointers are dense tensors in the
// layouts of ops/attention.h; lse and delta are f32 [B, Hq, T].
#include <cuda_runtime.h>

#include "ops/cuda/attention_mma.cuh"

namespace lt::ops::cuda::attn {

struct ForwardArgs {
  Shape4 s;
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  float scale;
};

struct BackwardArgs {
  Shape4 s;
  const void* q;
  const void* k;
  const void* v;
  const void* dout;
  const float* lse;
  const float* delta;  // rowsum(dout * out), from launch_delta
  float* dq_accum;     // f32 [B, T, Hq, D], zeroed; the flash kernel adds dS K into it unscaled
  void* dq;            // for the row kernels, which write dq directly
  void* dk;
  void* dv;
  float scale;
};

// attention_fwd.cu / attention_bwd.cu: bf16, head_dim 64 or 128, every
// pointer 16-byte aligned.
bool flash_supported(const Shape4& s);
void launch_flash_forward(const ForwardArgs& a, cudaStream_t stream);
void launch_flash_backward(const BackwardArgs& a, cudaStream_t stream);

// attention_rows.cu: any head_dim up to kRowsMaxHeadDim, T = float or bf16.
constexpr int kRowsMaxHeadDim = 256;
template <typename T>
void launch_rows_forward(const ForwardArgs& a, cudaStream_t stream);
template <typename T>
void launch_rows_backward(const BackwardArgs& a, cudaStream_t stream);

// delta[b, h, t] = sum_d dout[b, t, h, d] * out[b, t, h, d], in f32.
template <typename T>
void launch_delta(const Shape4& s, const T* dout, const T* out, float* delta, cudaStream_t stream);

// dq = scale * dq_accum, rounded to bf16.
void launch_dq_cast(const float* dq_accum, bf16* dq, int64_t n, float scale, cudaStream_t stream);

}  // namespace lt::ops::cuda::attn
