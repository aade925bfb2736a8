// The NCCL path of data parallel on one GPU (issue 21; the two-GPU runs
// need a machine of several GPUs):
//  - a 1-rank NCCL communicator through the resident executor's real data
//    parallel code (global denominator, all-reduce, norm of the sum) equals
//    the executor without one: with one rank the all-reduce adds nothing,
//    the denominator is the same count and the norm the same partial sums,
//    so losses, norms and weights should agree to the bit (checked within
//    1e-12 relative, the first run to say);
//  - the sum itself, f32 and bf16 tensors and host doubles, is the identity;
//  - collectives started on the communication stream (gradient buckets,
//    all-gathers of host buffers) complete one at a time, oldest first: a
//    wait for the oldest leaves the later ones' results unwritten, and a
//    host buffer receives what it held when its gather started;
//  - NCCL refuses two ranks on one GPU, and both get an error naming them
//    within the timeout instead of hanging.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "core/random.h"
#include "dist/nccl_sum.h"
#include "exec/resident.h"
#include "gpu_test_support.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "train/train_helpers.h"
#include "train_compare.h"

namespace lt::exec {
namespace {

using namespace gpu_test;

dist::World one_rank() {
  dist::World w;
  w.launcher = dist::Launcher::Torchrun;
  return w;
}

TrainRun train(CrossRankSum* ranks, DType compute,
               const std::vector<std::vector<data::Batch>>& batches,
               int64_t bucket_bytes = ResidentExecutor::kDefaultBucketBytes) {
  models::CausalLM model = io::load_hf_model(fixture("qwen3"));
  model.to(Device::cuda(0), DType::F32);
  optim::AdamWOptions o;
  o.lr = 2e-3;
  optim::AdamW adam(model.parameters(), o, {"norm"});
  ResidentExecutor executor(model, adam, compute, ranks, bucket_bytes);
  TrainRun r;
  r.initial = host_values(model);
  for (const auto& step : batches) {
    StepOptions so;
    so.lr = 2e-3;
    so.max_grad_norm = 1.0;
    r.stats.push_back(executor.step(step, so));
  }
  r.params = host_values(model);
  return r;
}

TEST(NcclOneRank, ResidentEqualsTheRunWithoutACommunicator) {
  LT_REQUIRE_GPU();
  const auto batches = make_batches(3, 16, 97, 5, 1);
  // One bucket of the whole model, and 4 KB buckets: many all-reduces on
  // the communication stream while the backward still runs.
  for (DType compute : {DType::F32, DType::BF16}) {
    const TrainRun without = train(nullptr, compute, batches);
    for (int64_t bucket_bytes : {ResidentExecutor::kDefaultBucketBytes, int64_t{4096}}) {
      SCOPED_TRACE(std::string(dtype_name(compute)) + ", buckets of " +
                   std::to_string(bucket_bytes) + " bytes");
      auto ranks = dist::make_nccl_sum(one_rank(), 0, dist::make_nccl_id(), 60);
      const TrainRun with = train(ranks.get(), compute, batches, bucket_bytes);
      for (size_t s = 0; s < batches.size(); ++s) {
        EXPECT_LE(rel(with.stats[s].loss, without.stats[s].loss), 1e-12);
        EXPECT_LE(rel(with.stats[s].grad_norm, without.stats[s].grad_norm), 1e-12);
        EXPECT_EQ(with.stats[s].tokens, without.stats[s].tokens);
        EXPECT_EQ(with.stats[s].target_count, without.stats[s].target_count);
      }
      EXPECT_EQ(with.params, without.params);
    }
  }
}

TEST(NcclOneRank, SumIsTheIdentity) {
  LT_REQUIRE_GPU();
  auto ranks = dist::make_nccl_sum(one_rank(), 0, dist::make_nccl_id(), 60);
  Generator gen(3);
  const Tensor f32 = Tensor::randn({1000}, gen).to(Device::cuda(0));
  const Tensor bf16 = Tensor::randn({37}, gen).to(Device::cuda(0), DType::BF16);
  const auto f32_before = f32.to(Device::cpu()).to_doubles();
  const auto bf16_before = bf16.to(Device::cpu()).to_doubles();
  ranks->sum({f32, bf16});
  EXPECT_EQ(f32.to(Device::cpu()).to_doubles(), f32_before);
  EXPECT_EQ(bf16.to(Device::cpu()).to_doubles(), bf16_before);
  std::vector<double> values(3000, 0.25);  // more than one scratch buffer
  ranks->sum(values);
  EXPECT_EQ(values, std::vector<double>(3000, 0.25));
}

// Note [Collectives on the communication stream] (dist/nccl_sum.cpp). The
// host buffers are overwritten after their gathers start, which callers
// must not do, so that what the waits write into them shows: with one rank
// the gather of a buffer is what the buffer held at the start (its own
// shard, uploaded then), and a gather not yet waited for writes nothing.
TEST(NcclOneRank, StartedCollectivesFinishOldestFirst) {
  LT_REQUIRE_GPU();
  auto ranks = dist::make_nccl_sum(one_rank(), 0, dist::make_nccl_id(), 60);
  Generator gen(5);
  const Tensor first = Tensor::randn({4099}, gen), second = Tensor::randn({33}, gen);
  const Tensor bucket = Tensor::randn({517}, gen).to(Device::cuda(0));
  const auto first_before = first.to_doubles(), second_before = second.to_doubles();
  const auto bucket_before = bucket.to(Device::cpu()).to_doubles();
  ranks->start_all_gather(first);
  ranks->start_sum({bucket});
  ranks->start_all_gather(second);
  first.fill_(7.0);
  second.fill_(7.0);
  ranks->wait_for_oldest_sums(1);
  EXPECT_EQ(first.to_doubles(), first_before);
  EXPECT_EQ(second.to_doubles(), std::vector<double>(33, 7.0)) << "written before its wait";
  ranks->wait_for_oldest_sums(1);
  EXPECT_EQ(bucket.to(Device::cpu()).to_doubles(), bucket_before);
  EXPECT_EQ(second.to_doubles(), std::vector<double>(33, 7.0)) << "written before its wait";
  ranks->wait_for_sums();
  EXPECT_EQ(second.to_doubles(), second_before);
  // The synchronous all-gather, with one still in flight before it.
  ranks->start_all_gather(first);
  ranks->all_gather(second);
  EXPECT_EQ(first.to_doubles(), first_before);
  EXPECT_EQ(second.to_doubles(), second_before);
}

TEST(NcclOneRank, TwoRanksOnOneGpuAreRefusedNotHung) {
  LT_REQUIRE_GPU();
  const dist::NcclId id = dist::make_nccl_id();
  auto rank = [&](int r) {
    dist::World w;
    w.launcher = dist::Launcher::Torchrun;
    w.rank = r;
    w.size = 2;
    try {
      dist::make_nccl_sum(w, 0, id, 30);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto r0 = std::async(std::launch::async, rank, 0);
  auto r1 = std::async(std::launch::async, rank, 1);
  const std::string e0 = r0.get(), e1 = r1.get();
  EXPECT_NE(e0.find("rank 0 of 2"), std::string::npos) << e0;
  EXPECT_NE(e1.find("rank 1 of 2"), std::string::npos) << e1;
}

}  // namespace
}  // namespace lt::exec
