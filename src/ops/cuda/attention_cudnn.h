#pragma once
// Causal attention through cuDNN's fused flash-attention engines, built as
// an operation graph with cuDNN's backend API (cudnn_graph.h): matmul,
// pointwise scale, a causal mask from generated row/column indices, the
// softmax as reductions and pointwise ops, and a second matmul; the backward
// graph recomputes the probabilities from the saved statistics.
//
// Declared without cuDNN or CUDA types so that attention.cu includes it in
// every build. Defined for real only when the build found cuDNN
// (LT_HAVE_CUDNN); otherwise every call reports "not built" and the caller
// uses the project's own kernels.
//
// Tensors are dense, in the layouts of ops/attention.h: q, out, dout, dq
// [B, T, Hq, D] bf16; k, v, dk, dv [B, T, Hkv, D] bf16; lse f32 [B, Hq, T].
// cuDNN's softmax statistics (row max + log of the row sum of exp, the
// scale applied before the softmax) are exactly that lse, so a cuDNN
// forward and the own backward (or the reverse) may be mixed; the GPU tests
// check both mixtures against the CPU backend.
#include <cstdint>
#include <string>

namespace lt::ops::cuda::cudnn_attn {

struct Problem {
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  double scale = 0;
  int device = 0;
};

// Why cuDNN cannot take this problem ("" when it may): not built with
// cuDNN, an old cuDNN at run time, or a shape outside what the graph
// supports (bf16 only, head_dim 64 or 128, Hq a multiple of Hkv; the
// backward also needs T a multiple of 128 on cuDNN before 9.16, which
// otherwise needs padding-mask inputs this graph does not build).
std::string unsupported_reason(const Problem& p, bool backward);

// Run the forward / backward on `stream` (a cudaStream_t). Returns "" when
// it ran, else why it could not (the graph did not build, no engine
// accepted it, the execution was refused); the caller then runs its own
// kernels. Plans are built once per problem and device and cached, failures
// and refusals (unsupported_reason) too: a problem cuDNN cannot take costs
// one lookup in that cache after its first call.
std::string forward(const Problem& p, const void* q, const void* k, const void* v, void* out,
                    float* lse, void* stream);

std::string backward(const Problem& p, const void* q, const void* k, const void* v, const void* out,
                     const void* dout, const float* lse, void* dq, void* dk, void* dv,
                     void* stream);

// cudnnGetVersion() of the loaded library (e.g. 91400), 0 when not built.
int64_t runtime_version();

}  // namespace lt::ops::cuda::cudnn_attn
