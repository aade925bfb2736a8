#pragma once
// The bf16 reference the GPU executor tests (streaming, offload) compare
// with: the resident executor on the GPU, masters and AdamW on the device,
// bf16 compute, with the AdamW settings and step options they all use
// (and the resident GPU tests' runs, on either device and in either dtype).
#include <memory>
#include <vector>

#include "exec/resident.h"
#include "models/compiled_blocks.h"
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

// Trains `model` (masters, moved to `device` first) for the batches with
// the resident executor in `compute`, AdamW on the masters' device.
// `compiled`: the blocks run through the fusion compiler (train.compile on).
inline TrainRun train_resident(models::CausalLM model, Device device, DType compute,
                               const std::vector<std::vector<data::Batch>>& batches,
                               std::shared_ptr<models::CompiledBlocks> compiled = nullptr) {
  if (device.is_cuda()) model.to(device, DType::F32);
  model.use_compiled_blocks(std::move(compiled));
  optim::AdamW adam(model.parameters(), adam_options(), {"norm"});
  ResidentExecutor executor(model, adam, compute);
  TrainRun r;
  r.initial = host_values(model);
  for (const auto& b : batches) r.stats.push_back(executor.step(b, step_options()));
  r.params = host_values(model);
  return r;
}

// The reference: masters on the GPU, bf16 compute, AdamW on the GPU.
inline TrainRun train_resident(models::CausalLM model,
                               const std::vector<std::vector<data::Batch>>& batches) {
  return train_resident(std::move(model), Device::cuda(0), DType::BF16, batches);
}

}  // namespace lt::exec::gpu_test
