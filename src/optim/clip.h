#pragma once
// Global-norm gradient clipping as torch.nn.utils.clip_grad_norm_ (norm_type
// 2) computes it, split so that the scale is folded into the optimizer's own
// pass instead of a separate pass that rewrites every gradient:
//
//   total_norm = sqrt(sum over parameters with a gradient of sum g^2)
//   scale      = min(1, max_norm / (total_norm + 1e-6))
//   optimizer.update(lr, scale, ...)  ==  grads *= scale; then the update
//
// The sum is accumulated in double (torch sums in the gradients' dtype), in
// fixed-size chunks whose partial sums are added in a fixed order, so the
// norm is the same for any number of threads.
#include "nn/module.h"

namespace lt::optim {

// sum of g^2 over every defined gradient (f32 or bf16; CPU). Parameters
// without a gradient contribute nothing. A caller that produces gradients
// in pieces (per stage) may add these partial sums itself.
double grad_squared_sum(const nn::NamedParameters& params);

// sqrt(grad_squared_sum(params)): the value logged as grad_norm.
double global_grad_norm(const nn::NamedParameters& params);

// The pieces of grad_squared_sum's CPU computation, for a caller that gets
// the gradients one at a time (optim/grad_norm_partials.h): each gradient
// is cut into grad_norm_chunk_count(numel) fixed chunks, and adding every chunk's sum
// in order (gradients in parameter order) gives grad_squared_sum exactly.
int64_t grad_norm_chunk_count(int64_t numel);
// Writes the sum of squares of chunk c of `grad` (f32 or bf16, on the CPU)
// to out[c], for c in [0, grad_norm_chunk_count(grad.numel())); chunks run
// on the thread pool.
void grad_chunk_squares(const Tensor& grad, double* out);

// The factor every gradient is multiplied by. max_norm <= 0 turns clipping
// off (1). Like torch, a NaN norm gives NaN and an infinite one gives 0:
// check std::isfinite(total_norm) first and skip such a step.
double clip_scale(double total_norm, double max_norm);

}  // namespace lt::optim
