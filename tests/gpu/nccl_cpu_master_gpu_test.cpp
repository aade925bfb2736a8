// The CPU-master executors' data parallel on one GPU through a 1-rank NCCL
// communicator (issue 21): the real code path of a GPU rank (each stage's
// gradients reduced on the device before the download; with ZeRO-1 laid
// into the flat layout, reduce-scattered, the shard downloaded and widened
// on the host, the masters all-gathered through device memory and the
// pinned bf16 copies refreshed) against the same executor without a
// communicator. With one rank the all-reduce adds nothing and the shard is
// the whole model:
//  - all-reduce: the same bf16 gradients reach the same host slabs, so
//    losses, norms and weights agree to the bit (within 1e-12 relative);
//  - ZeRO-1: the same gradients, but AdamW reads them widened to f32 and
//    the norm adds them in another order: losses within 1e-6, the weights
//    within 1e-4 of how far training moved them (a lost or doubled
//    gradient, or a stale bf16 copy, gives about 1);
//  - ZeRO-1 over weights in shared memory (exec/shared_weights.h: a POSIX
//    shm segment registered with cudaHostRegister, the masters and the bf16
//    copies the GPU uploads from in it, each rank's update writing its own
//    pieces of both): as ZeRO-1 without it.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include <unistd.h>

#include "bf16_reference.h"
#include "core/cuda/runtime_calls.h"
#include "dist/nccl_sum.h"
#include "dist/shared_memory.h"
#include "exec/cuda/streaming_device_cuda.h"
#include "exec/offload.h"
#include "exec/shared_weights.h"
#include "exec/streaming.h"
#include "exec/zero_optimizer.h"
#include "gpu_test_support.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "train_compare.h"

namespace lt::exec {
namespace {

using namespace gpu_test;

enum class Ranks { None, AllReduce, Zero, ZeroShared };

dist::World one_rank() {
  dist::World w;
  w.launcher = dist::Launcher::Torchrun;
  return w;
}

// The executor `offload` (else streaming) over the fixture, with `ranks`.
TrainRun train(bool offload, Ranks ranks, const std::vector<std::vector<data::Batch>>& batches) {
  models::CausalLM model = io::load_hf_model(fixture("qwen3"));
  // ZeroShared: the weights in a segment of shared memory, page-locked,
  // as the ranks of a host share them (local rank 0 of 1).
  std::unique_ptr<SharedWeights> shared;
  const size_t groups = streaming_zero_groups(model).size();  // one per stage, both executors
  if (ranks == Ranks::ZeroShared) {
    const size_t bytes = SharedWeights::bytes_for(model.parameters(), groups, 1, true);
    auto memory = std::make_shared<dist::SharedMemory>(
        dist::SharedMemory::create("/lazytrain-gputest-" + std::to_string(::getpid()), bytes));
    memory->unlink();
    cuda::host_register(memory->data(), bytes);
    memory->before_unmap = [data = memory->data()] { cuda::host_unregister(data); };
    shared = std::make_unique<SharedWeights>(memory, memory->data(), bytes, model.parameters(),
                                             groups, 0, 1, true, 60);
    shared->write_weights();
    shared->adopt();
  }
  std::unique_ptr<CrossRankSum> sum;
  if (ranks != Ranks::None) sum = dist::make_nccl_sum(one_rank(), 0, dist::make_nccl_id(), 60);
  std::unique_ptr<optim::Optimizer> optimizer;
  ZeroOptimizer* zero = nullptr;
  if (ranks == Ranks::Zero || ranks == Ranks::ZeroShared) {
    auto z = std::make_unique<ZeroOptimizer>(model.parameters(), adam_options(),
                                             std::vector<std::string>{"norm"}, *sum,
                                             streaming_zero_groups(model));
    zero = z.get();
    if (shared) z->share_weights(*shared);
    optimizer = std::move(z);
  } else {
    optimizer = std::make_unique<optim::AdamW>(model.parameters(), adam_options(),
                                               std::vector<std::string>{"norm"});
  }
  TrainRun r;
  r.initial = host_values(model);
  {
    std::vector<Tensor> shared_copies;
    for (size_t i = 0; shared && i < model.parameters().size(); ++i)
      shared_copies.push_back(shared->bf16_copy(i));
    auto device =
        std::make_unique<CudaStreamingDevice>(model.parameters(), *optimizer, 0, shared_copies);
    std::unique_ptr<Executor> executor;
    if (offload) {
      OffloadOptions o;
      o.adam = adam_options();
      o.no_decay = {"norm"};
      o.ranks = sum.get();
      o.zero = zero;
      executor = std::make_unique<OffloadExecutor>(model, *optimizer, std::move(device), o);
    } else {
      StreamingOptions o;
      o.schedule = Schedule::all_gpu(static_cast<int>(model.config().num_hidden_layers));
      o.ranks = sum.get();
      o.zero = zero;
      executor = std::make_unique<StreamingExecutor>(model, *optimizer, std::move(device), o);
    }
    for (const auto& b : batches) r.stats.push_back(executor->step(b, step_options()));
    executor->sync_masters();
  }
  r.params = host_values(model);
  return r;
}

TEST(NcclOneRank, CpuMasterExecutorsEqualTheRunWithoutACommunicator) {
  LT_REQUIRE_GPU();
  const auto batches = make_batches(3, 16, 97, 5, 1);
  for (bool offload : {false, true}) {
    const TrainRun without = train(offload, Ranks::None, batches);
    for (Ranks ranks : {Ranks::AllReduce, Ranks::Zero, Ranks::ZeroShared}) {
      const bool zero = ranks != Ranks::AllReduce;
      SCOPED_TRACE(std::string(offload ? "offload" : "streaming") +
                   (ranks == Ranks::ZeroShared ? ", ZeRO-1 over shared weights"
                    : zero                     ? ", ZeRO-1"
                                               : ", all-reduce"));
      const TrainRun with = train(offload, ranks, batches);
      ASSERT_EQ(with.stats.size(), without.stats.size());
      for (size_t s = 0; s < batches.size(); ++s) {
        EXPECT_FALSE(with.stats[s].skipped) << "step " << s;
        EXPECT_LE(rel(with.stats[s].loss, without.stats[s].loss), zero ? 1e-6 : 1e-12);
        EXPECT_LE(rel(with.stats[s].grad_norm, without.stats[s].grad_norm), zero ? 1e-6 : 1e-12);
        EXPECT_EQ(with.stats[s].tokens, without.stats[s].tokens);
      }
      EXPECT_LT(update_rel_error(with, without), zero ? 1e-4 : 1e-12);
    }
  }
}

}  // namespace
}  // namespace lt::exec
