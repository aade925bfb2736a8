// train.compile under the offload and streaming executors on the GPU
// (CudaStreamingDevice: bf16 weights on the device, f32 masters and AdamW
// on the host): the llama fixture trained with its blocks compiled (the
// offload executor's device copy shares them; streaming runs each stage
// through CausalLM::run_stage) against the same executor unfused, within
// the bf16 bounds of TrainCompileGpu (losses 1e-2, gradient norms 3e-2,
// masters 0.35 of how far they moved). The compiled runs must fuse: every
// block builds its programs, none falls back. Kernels come from
// $LT_GPU_KERNELS (GpuKernelPrebuild.* fills it where MLIR is, from
// models::block_kernel_graphs, which lists every kernel these executors
// compile: TrainCompileExecutors.BlockKernelGraphsListEveryKernel...).
#include <gtest/gtest.h>

#include <memory>

#include "bf16_reference.h"
#include "compile/kernel_cache.h"
#include "exec/cuda/streaming_device_cuda.h"
#include "exec/offload.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
#include "support/gpu_kernel_cases.h"

namespace lt::exec {
namespace {

using namespace gpu_test;

TrainRun train_on(bool streaming, models::CausalLM model,
                  const std::vector<std::vector<data::Batch>>& batches,
                  std::shared_ptr<models::CompiledBlocks> compiled) {
  model.use_compiled_blocks(std::move(compiled));
  optim::AdamW adam(model.parameters(), adam_options(), {"norm"});
  auto device = std::make_unique<CudaStreamingDevice>(model.parameters(), adam);
  std::unique_ptr<Executor> executor;
  if (streaming) {
    executor =
        std::make_unique<StreamingExecutor>(model, adam, std::move(device), StreamingOptions{});
  } else {
    OffloadOptions o;
    o.adam = adam_options();
    o.no_decay = {"norm"};
    executor = std::make_unique<OffloadExecutor>(model, adam, std::move(device), o);
  }
  TrainRun r;
  r.initial = host_values(model);
  for (const auto& b : batches) r.stats.push_back(executor->step(b, step_options()));
  executor->sync_masters();
  executor.reset();
  r.params = host_values(model);
  return r;
}

TEST(TrainCompileExecutorsGpu, OffloadAndStreamingFuseAndFollowTheUnfusedRun) {
  LT_REQUIRE_GPU();
  const auto batches = make_batches(3, 16, 97, 5, 1);  // micro-batches of 16 and 13 tokens
  const auto model = [] { return io::load_hf_model(fixture("llama")); };
  for (bool streaming : {false, true}) {
    const std::string label = streaming ? "streaming" : "offload";
    SCOPED_TRACE(label);
    const TrainRun plain = train_on(streaming, model(), batches, nullptr);
    auto cache = std::make_shared<compile::KernelCache>(compile::testing::gpu_test_kernel_folder());
    auto compiled = std::make_shared<models::CompiledBlocks>(cache);
    const TrainRun fused = train_on(streaming, model(), batches, compiled);
    compare_runs(fused, plain, 1e-2, 3e-2, 0.35, label + " compiled against unfused");
    const models::CompiledBlockStats stats = compiled->stats();
    std::printf("%s: %s\n", label.c_str(),
                models::compile_summary(stats, compiled->cache_stats()).c_str());
    // Two micro-batch shapes per block; streaming runs each also without
    // gradients (its forward pass).
    const int64_t blocks = model().config().num_hidden_layers;
    EXPECT_EQ(stats.programs, blocks * 2 * (streaming ? 2 : 1)) << stats.first_fallback;
    EXPECT_EQ(stats.fallbacks, 0) << stats.first_fallback;
  }
}

}  // namespace
}  // namespace lt::exec
