#pragma once
// The CUDA sum of squared gradients behind optim/clip.cpp. Declared without
// CUDA types; defined only when LT_WITH_CUDA.
#include <vector>

#include "core/tensor.h"

namespace lt::optim::cuda {

// sum over every tensor of sum g^2, accumulated in double. `grads` are f32
// or bf16, contiguous, all on one CUDA device. One launch per dtype over
// all gradients of that dtype: every gradient is cut into fixed chunks, one
// block per chunk writes a partial sum (squares of f32 values accumulated
// in double), and one block adds the partials in one fixed order, so the
// result depends on the data and shapes only. Runs on the current stream
// and waits for it (the value is needed on the host).
double squared_sum(const std::vector<Tensor>& grads);

// The pieces of the same computation for a caller that produces the
// gradients one at a time (optim/grad_norm_partials.h): it lays out one
// partial slot per chunk of every gradient, fills each gradient's slots as
// that gradient becomes final, and adds all slots at the end.

// How many partial slots (chunks) a gradient of `numel` elements fills.
int64_t chunk_count(int64_t numel);

// Enqueues on `stream` (a cudaStream_t; nullptr is the legacy default
// stream) one launch writing the sum of squares of each chunk of `grad`
// (f32 or bf16, contiguous, on a CUDA device) to
// partial[0 .. chunk_count(grad.numel())), with the arithmetic of
// squared_sum's first pass. The host does not wait; `grad` and `partial`
// must stay allocated until that work has run.
void enqueue_chunk_squares(const Tensor& grad, double* partial, void* stream);

// Enqueues on `stream`: partial[0 .. count) = 0.
void enqueue_zero(Device device, double* partial, int64_t count, void* stream);

// Enqueues on `stream`: *out = the sum of partial[0 .. count) in
// squared_sum's fixed order, then its copy to `host_out` (page-locked, so
// the copy is asynchronous; valid once the stream has reached it).
void enqueue_sum_to_host(Device device, const double* partial, int64_t count, double* out,
                         double* host_out, void* stream);

}  // namespace lt::optim::cuda
