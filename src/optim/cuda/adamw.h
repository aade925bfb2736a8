#pragma once
// The CUDA AdamW update behind optim/adamw.cpp: per element exactly what
// optim/adamw_kernel.h does on the CPU (same f32 operations in the same
// order, no FMA contraction), so a parameter updated on the GPU matches the
// CPU update bit for bit. Declared without CUDA types so that adamw.cpp
// includes it in every build; defined only when LT_WITH_CUDA.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "optim/adamw_kernel.h"

namespace lt::optim::cuda {

// One parameter of a multi-tensor step: raw device pointers (all on the
// device given to adamw_update_multi) and its own scalars. param, exp_avg
// and exp_avg_sq are f32; shadow, when not null, gets bf16(new param)
// (round to nearest even) in the same pass.
struct AdamWCudaJob {
  AdamWScalars s;
  float* param = nullptr;
  const void* grad = nullptr;  // f32, or bf16 when grad_is_bf16
  bool grad_is_bf16 = false;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  uint16_t* shadow = nullptr;  // bf16 bits, or null
  int64_t numel = 0;
};

// Updates every job in place, in one kernel launch: the jobs are cut into
// fixed chunks of elements, one thread block per chunk, and a small table of
// the jobs is uploaded on the stream. Each element gets exactly the CPU's
// update (optim/adamw_kernel.h). Runs on the calling thread's current
// stream of `device`. The caller has checked devices, dtypes and counts.
void adamw_update_multi(Device device, const std::vector<AdamWCudaJob>& jobs);

}  // namespace lt::optim::cuda
