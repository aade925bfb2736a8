#pragma once
// The bf16 reference the GPU executor tests (streaming, offload) compare
// with: the resident executor on the GPU, masters and AdamW on the device,
// bf16 compute, with the AdamW settings and step options they all use.
#include <vector>

#include "exec/resident.h"
#include "optim/adamw.h"
#include "train_compare.h"

namespace lt::exec::gpu_test {

inline optim::AdamWOptions adam_options() {
  optim::AdamWOptions o;
  o.lr = 2e-3;
  o.weight_decay = 0.01;
  return o;
}

inline StepOptions step_options() {
  StepOptions so;
  so.lr = 2e-3;
  so.max_grad_norm = 1.0;  // the fixtures' norms are above 1: clipping is exercised
  return so;
}

// The reference: masters on the GPU, bf16 compute, AdamW on the GPU.
inline TrainRun train_resident(models::CausalLM model,
                               const std::vector<std::vector<data::Batch>>& batches) {
  model.to(Device::cuda(0), DType::F32);
  optim::AdamW adam(model.parameters(), adam_options(), {"norm"});
  ResidentExecutor executor(model, adam, DType::BF16);
  TrainRun r;
  r.initial = host_values(model);
  for (const auto& b : batches) r.stats.push_back(executor.step(b, step_options()));
  r.params = host_values(model);
  return r;
}

}  // namespace lt::exec::gpu_test
